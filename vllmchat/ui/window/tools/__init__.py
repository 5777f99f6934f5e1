"""MCP tools in the window: servers offered in every turn, calls asked about and shown."""
