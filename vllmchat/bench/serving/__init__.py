"""Benchmarks of the local API."""
