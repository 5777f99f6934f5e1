"""The application layer both front ends use: engine, chat session, KV states, settings
(``chat_app.ChatApp``), and the events it yields (``events``)."""
