"""llama.cpp itself: the one llama-cpp-python adapter, greedy sampling, its log,
tensor overrides and the KV state file."""
