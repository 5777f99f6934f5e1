"""``vllmchat tools list`` and ``import``: real servers started, states and tools printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def _vllmchat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllmchat.main", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


def test_tools_list_json_starts_each_server_and_names_its_tools(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "demo": {"command": sys.executable, "args": [SERVER, "stdio"]},
                    "missing": {"command": "no-such-mcp-command"},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    done = _vllmchat("tools", "list", "--config", str(config), "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # one server failed
    report = json.loads(done.stdout)
    servers = {s["name"]: s for s in report["servers"]}
    assert servers["demo"]["state"] == "ready"
    assert {"add", "echo", "crash"} <= set(servers["demo"]["tools"])
    assert servers["missing"]["state"] == "failed"
    assert "not found" in servers["missing"]["message"]
    assert servers["off"]["state"] == "disabled"


def test_tools_list_shows_a_syntax_error_with_line_and_column(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {\n  "a": {"command": "x"\n}')
    done = _vllmchat("tools", "list", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert "line 3, column 2" in done.stderr
    assert config.read_text() == '{"mcpServers": {\n  "a": {"command": "x"\n}'


def test_tools_list_names_a_config_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "mcp.json"
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "tools", "list", "--config", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{missing}: the file does not exist" in proc.stderr
