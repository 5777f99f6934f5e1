"""Benchmarks (commands, not timed tests) and synthetic models of real shapes."""
