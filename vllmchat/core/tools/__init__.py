"""Tools: MCP servers (``config``, ``manager``), the login shell's PATH (``login_path``),
tool calls in the model's own format (``calls``, ``prompting``), the user's approval
(``approval``), and the events this layer announces (``events``)."""
