"""Real MCP servers for the tool tests (run as scripts)."""
