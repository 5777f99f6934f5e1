"""A real MCP server for the tests, on the official SDK: ``python tool_server.py MODE [PORT]``.

Modes: ``stdio`` (the good tools), ``http PORT`` (the same tools, streamable HTTP on
loopback), ``weather`` (one tool, ``weather(city)``), ``bad-schema`` (one tool whose
input schema is not JSON Schema), ``faults`` (tools without arguments that fail each
its own way: ``huge``, ``stall``, ``crash``, ``fail``, for a model made to call one), ``die``
(writes to stderr and exits at start), ``hang`` (never answers the handshake).
"""

from __future__ import annotations

import os
import sys
import time

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server


def good_server() -> MCPServer:
    app = MCPServer("demo")

    @app.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @app.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    @app.tool()
    def fail(why: str = "it broke") -> str:
        """Always fails."""
        raise ValueError(why)

    @app.tool()
    def big(size: int) -> str:
        """A result of ``size`` bytes."""
        return "x" * size

    @app.tool()
    def sleep(seconds: float) -> str:
        """Answer after ``seconds`` (a hanging tool)."""
        time.sleep(seconds)
        return "slept"

    @app.tool()
    def crash() -> str:
        """The server dies during the call."""
        print("about to crash: simulated fault", file=sys.stderr, flush=True)
        os._exit(7)

    @app.tool()
    def env(name: str) -> str:
        """The server's environment variable ``name``."""
        return os.environ.get(name, "<unset>")

    return app


def weather_server() -> MCPServer:
    app = MCPServer("weather")

    @app.tool()
    def weather(city: str) -> str:
        """Today's weather report for a city."""
        return f"Sunny and 21 degrees in {city} today."

    return app


def faults_server() -> MCPServer:
    app = MCPServer("faults")

    @app.tool()
    def huge() -> str:
        """A result of 1.5 MB."""
        return "y" * 1_500_000

    @app.tool()
    def stall() -> str:
        """Never answers (a hanging tool)."""
        time.sleep(3600)
        return "late"

    @app.tool()
    def crash() -> str:
        """The server dies during the call."""
        print("about to crash: simulated fault", file=sys.stderr, flush=True)
        os._exit(7)

    @app.tool()
    def fail() -> str:
        """Always fails."""
        raise ValueError("the disk is full")

    return app


def bad_schema_server() -> Server:
    async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="broken",
                    description="its schema is not JSON Schema",
                    input_schema={"type": "object", "properties": {"x": {"type": "integr"}}},
                ),
                types.Tool(
                    name="fine",
                    description="a good tool beside it",
                    input_schema={"type": "object", "properties": {}},
                ),
            ]
        )

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="fine")])

    return Server("bad-schema", on_list_tools=list_tools, on_call_tool=call_tool)


async def _run_lowlevel(server: Server) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    print(f"tool_server starting in mode {mode}", file=sys.stderr, flush=True)
    if mode == "stdio":
        good_server().run("stdio")
    elif mode == "weather":
        weather_server().run("stdio")
    elif mode == "faults":
        faults_server().run("stdio")
    elif mode == "http":
        good_server().run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif mode == "bad-schema":
        anyio.run(_run_lowlevel, bad_schema_server())
    elif mode == "die":
        print("fatal: DEMO_API_KEY is not set", file=sys.stderr, flush=True)
        sys.exit(3)
    elif mode == "hang":
        time.sleep(3600)


if __name__ == "__main__":
    main()
