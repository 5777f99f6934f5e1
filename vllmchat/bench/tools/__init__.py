"""Tool benchmarks: a round trip through the model and a loopback MCP server."""
