"""The local API: OpenAI's shape first, with Anthropic's and Ollama's, on loopback.

A thin front end on the application layer (``core/app/serving``): it parses and
checks requests, guards the door (host, origin, key, size), and writes answers in
each shape. It keeps nothing beyond its connections."""
