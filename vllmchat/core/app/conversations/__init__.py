"""The conversations as the application layer serves them: the one owner (``service``),
its edits, attachments, reading ahead and titles."""
