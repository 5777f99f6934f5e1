"""The local engine: the client that spawns the llama.cpp process and talks to it."""
