"""Models: what a GGUF holds, whether it fits, where to get it."""
