"""The GUI's handle on the application layer; the application's and tools' events as signals."""
