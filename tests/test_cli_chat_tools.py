"""``vllmchat chat --mcp CONFIG`` in a real terminal process: /tools and a turn with tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def test_terminal_chat_with_tools(demo_model, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [SERVER]}}})
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", "--mcp", str(config), "--n-ctx", "2048",
         "--max-tokens", "24", "--temperature", "0"],
        input="/tools\nHello there\n/quit\n",
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "demo: ready (add, echo, fail, big, sleep, crash, env)" in proc.stdout
    assert "ai> " in proc.stdout


def test_a_broken_mcp_config_stops_the_chat_before_it_starts(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"a": }')
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", "--mcp", str(config)],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "line 1, column 22" in proc.stderr
