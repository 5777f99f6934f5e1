"""Where the weights go: the memory estimate, the tuner, expert placement, a GPU
held by another process."""
