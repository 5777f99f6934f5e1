"""The engine process's loop: the entry point the client spawns, the worker, the
request registry and its handlers."""
