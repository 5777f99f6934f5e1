"""``vllmchat chat --mcp CONFIG`` in a real terminal process: /tools and a turn with tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import terminal_chat

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def test_terminal_chat_with_tools(demo_model, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [SERVER]}}})
    )
    proc = terminal_chat(
        "/tools\nHello there\n/quit\n",
        "--mcp",
        str(config),
        "--n-ctx",
        "2048",
        "--max-tokens",
        "24",
        "--temperature",
        "0",
        timeout=180,
    )
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


def _chat_requiring_tools(
    config: Path, lines: list[str], *, max_tokens: int
) -> subprocess.CompletedProcess[str]:
    """``vllmchat chat`` with the servers of ``config``, a call required each turn,
    typing ``lines``."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "vllmchat",
            "chat",
            "--mcp",
            str(config),
            "--n-ctx",
            "2048",
            "--max-tokens",
            str(max_tokens),
            "--temperature",
            "0",
            "--tool-choice",
            "required",
        ],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_tools_on_and_off_for_the_conversation_and_an_always_approval_revoked(
    demo_model, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [SERVER]}}})
    )
    approved = tmp_path / "mcp-approved.json"
    approved.write_text(json.dumps(["demo_add", "demo_echo"]))
    lines = [
        "/tools",
        "/tools off demo",
        "/tools on demo_add",
        "/tools on nope",
        "/tools",
        "/tools revoke demo_add",
        "What is 2 plus 40?",
        "a",  # the call asks again: allowed always, kept again
        "/quit",
    ]
    proc = _chat_requiring_tools(config, lines, max_tokens=64)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "always allowed: demo_add, demo_echo" in out
    assert "demo off in this conversation from its next turn; offered: no tools" in out
    assert "demo_add on in this conversation from its next turn; offered: demo_add" in out
    assert "error: There is no server or tool named 'nope'" in out
    assert "off in this conversation: echo, fail, big, sleep, crash, env" in out
    assert "demo_add: no longer always allowed; each call asks again" in out
    assert "[tool call] demo · add" in out and "[demo_add: ok] 42" in out
    assert sorted(json.loads(approved.read_text())) == ["demo_add", "demo_echo"]


def test_a_crashing_and_a_hanging_tool_are_told_and_the_chat_goes_on(
    demo_model, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    faults = {"command": sys.executable, "args": [SERVER, "faults"], "timeout": 2}
    config.write_text(json.dumps({"mcpServers": {"faults": faults}}))
    lines = [
        "/tools off faults",
        "/tools on faults_crash",
        "Please run the tool.",
        "o",
        "/tools off faults_crash",
        "/tools on faults_stall",
        "Please run the tool.",
        "o",
        "/quit",
    ]
    proc = _chat_requiring_tools(config, lines, max_tokens=32)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "[faults_crash: server_crashed] The tool server 'faults' crashed" in out
    assert "simulated fault" in out  # its last words
    assert "[faults_stall: timeout] faults_stall did not answer within 2 s" in out
    assert out.count("ai> ") >= 4  # each turn: the call, then an answer after its result


def test_an_mcp_config_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "mcp.json"
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", "--mcp", str(missing)],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"{missing}: the file does not exist" in proc.stderr
    assert "No MCP servers are configured" not in proc.stdout + proc.stderr


def test_a_server_that_does_not_start_is_said_once_in_the_chat(demo_model, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"gone": {"command": "vllmchat-no-such-mcp"}}}))
    proc = _chat_requiring_tools(config, ["Hello.", "Hello again.", "/quit"], max_tokens=8)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert out.count("[tools: ") == 1  # at the first turn, not again at the second
    assert "The MCP server 'gone' is not working (the command 'vllmchat-no-such-mcp'" in out
    assert "tool choice: required), but no MCP server is working: turns run without" in out
    assert out.count("ai> ") == 2
