"""mcp.json files for tests: the servers of ``tests/mcp_servers`` (or a broken one)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def server(mode: str = "stdio", **extra: object) -> dict[str, object]:
    """The test MCP server in ``mode`` (stdio: the demo tools; weather; faults)."""
    return {"command": sys.executable, "args": [SERVER, mode], **extra}


def write_config(
    folder: Path, servers: dict[str, dict[str, object]], *, approved: Iterable[str] = ()
) -> Path:
    """``folder/mcp.json`` with ``servers``; ``approved``: the tools always allowed."""
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    if approved:
        (folder / "mcp-approved.json").write_text(json.dumps(sorted(approved)))
    return config
