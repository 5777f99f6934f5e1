"""PySide6 user interface."""
