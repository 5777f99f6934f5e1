"""Conversation benchmarks: the long soak, opening large stores, summaries."""
