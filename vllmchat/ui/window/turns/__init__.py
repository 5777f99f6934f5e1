"""A turn as the window shows it: the message sent, the reply streamed, statistics, failures."""
