"""The main window and its start-up; its rooms: turns, loads, attachments, tools, conversations,
readouts, desktop, and the bridge to the application layer."""
