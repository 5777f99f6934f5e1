"""GPU offload and memory: the placement slider, the memory panel and the tuner."""
