"""Remote engines: OpenAI-compatible servers, their wire format, tools and the saved list."""
