"""The engine's benchmarks: decode against raw llama-cpp-python, speculation, the
verify batch, remote servers, GPU runs."""
