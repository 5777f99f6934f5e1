"""MCP tools as the application layer serves them: the one service, which tools a
conversation offers, and a turn that calls them."""
