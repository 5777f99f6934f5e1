"""A small MCP server for the tools benchmark: ``python -m vllmchat.bench.tools.mcp_loopback PORT``.

Streamable HTTP on 127.0.0.1 (the official ``mcp`` SDK), with two tools: ``add`` and
``weather`` (a fixed report of a known length, so a tool step's prefill can be
compared with the result's own tokens).
"""

from __future__ import annotations

import sys

REPORT = (
    "Weather for {city}: light rain in the morning, clearing by noon; 14 to 19 degrees "
    "Celsius; wind from the south-west at 12 km/h; humidity 71%; sunset at 19:42. "
    "Tomorrow: dry and sunny, up to 22 degrees."
)


def server() -> object:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("loopback")

    @app.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @app.tool()
    def weather(city: str) -> str:
        """Today's weather report for a city."""
        return REPORT.format(city=city)

    return app


def main() -> None:
    port = int(sys.argv[1])
    server().run("streamable-http", host="127.0.0.1", port=port)  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
