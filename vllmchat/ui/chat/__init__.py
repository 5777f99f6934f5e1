"""The chat: the conversation list, the messages and their rendering, the input."""
