"""Tools in the terminal chat: ``--mcp CONFIG``, ``/tools``, and approval prompts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from vllmchat.core.tools.approval import ApprovalPolicy
from vllmchat.core.tools.config import ConfigError, load_config
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolInfo,
)
from vllmchat.core.tools.manager import ToolServerManager

TOOLS_HELP = """  /tools          the MCP servers and their tools (started now)
  /tools restart NAME   start a server again   /tools revoke TOOL   ask before each call again"""

PROMPT = "allow? [o]nce, [c]onversation, [a]lways for this tool, [n]o (a reason may follow): "


def open_tools(config_file: Path, err: TextIO = sys.stderr) -> ToolServerManager | None:
    """The manager for ``--mcp CONFIG`` (servers start when first used), or None."""
    try:
        config = load_config(config_file)
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return None
    return ToolServerManager(config)


def ask_approval(
    event: ApprovalNeeded, out: TextIO, read_line: Callable[[], str] = sys.stdin.readline
) -> Approval:
    """Show the call and wait for the user's answer (end of input denies)."""
    args = json.dumps(dict(event.call.arguments), ensure_ascii=False, indent=2)
    out.write(f"\n[tool call] {event.tool.server} · {event.tool.name}\n{args}\n")
    while True:
        out.write(PROMPT)
        out.flush()
        line = read_line()
        if not line:
            return Approval("deny", "the user left")
        answer, _, reason = line.strip().partition(" ")
        decision = {"o": "once", "c": "conversation", "a": "always", "n": "deny"}.get(
            answer[:1].lower()
        )
        if decision is not None:
            return Approval(decision, reason.strip())  # type: ignore[arg-type]
        out.write("answer o, c, a or n\n")


def show_tool_event(event: Any, out: TextIO, read_line: Callable[[], str]) -> bool:
    """Print a tool event (answering approval prompts); False for other events."""
    if isinstance(event, ApprovalNeeded):
        event.answer.set_result(ask_approval(event, out, read_line))
    elif isinstance(event, ToolCallFinished):
        result = event.result
        first = result.text.strip().splitlines()[0][:160] if result.text.strip() else ""
        cut = " (cut)" if result.truncated else ""
        out.write(f"[{result.call.name}: {result.kind}{cut}] {first}\n")
    elif isinstance(event, ServerStatus):
        why = f": {event.message}" if event.message else ""
        out.write(f"[tools: {event.server} {event.state}{why}]\n")
    else:
        return False
    out.flush()
    return True


def _status_line(status: ServerStatus) -> str:
    if status.state == "ready":
        return f"{status.server}: ready ({', '.join(t.name for t in status.tools) or 'no tools'})"
    line = f"{status.server}: {status.state}" + (f" ({status.message})" if status.message else "")
    if status.stderr_tail:
        line += "\n    " + status.stderr_tail.splitlines()[-1]
    return line


def tools_command(
    arg: str, manager: ToolServerManager, policy: ApprovalPolicy, out: TextIO
) -> None:
    """``/tools``: start the servers and list them; ``restart NAME``; ``revoke TOOL``."""
    verb, _, rest = arg.strip().partition(" ")
    if verb == "restart":
        out.write(_status_line(manager.restart(rest.strip()).result(timeout=120)) + "\n")
        return
    if verb == "revoke":
        policy.revoke(rest.strip())
        out.write(f"{rest.strip()}: each call asks again\n")
        return
    for status in manager.start_all(timeout_s=120):
        out.write(_status_line(status) + "\n")
        for problem in status.problems:
            out.write(f"    {problem}\n")
    always = sorted(policy.always)
    if always:
        out.write(f"always allowed: {', '.join(always)}\n")


def offered(manager: ToolServerManager) -> list[ToolInfo]:
    """The tools to offer the model: every ready server's, after starting them."""
    manager.start_all(timeout_s=120)
    return manager.tools()
