"""The Server panel: the local API on the window's own model, its key, its log, its
clients' saved states and the engine's queue."""
