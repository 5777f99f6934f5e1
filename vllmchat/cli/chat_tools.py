"""Tools in the terminal chat: ``--mcp CONFIG``, ``/tools``, and approval prompts.

Tools always allowed are kept in ``mcp-approved.json`` next to CONFIG, as the window
keeps them next to its ``mcp.json``; ``/tools on|off`` changes this conversation's pick."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import EditRefused
from vllmchat.core.tools.approval import ApprovalPolicy
from vllmchat.core.tools.approved import load_approved, save_approved
from vllmchat.core.tools.config import ConfigError, load_config
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolInfo,
)
from vllmchat.core.tools.manager import ToolServerManager

TOOLS_HELP = """  /tools          the MCP servers and their tools (started now), on or off here
  /tools on NAME… / off NAME…   offer a server or tool in this conversation, or not
  /tools restart NAME   start a server again   /tools revoke TOOL   ask before each call again"""

PROMPT = "allow? [o]nce, [c]onversation, [a]lways for this tool, [n]o (a reason may follow): "


@dataclass
class TerminalTools:
    """``--mcp CONFIG``'s servers, the approvals, and where the always-allowed are kept."""

    manager: ToolServerManager
    policy: ApprovalPolicy
    config_file: Path

    def remember(self, event: ApprovalNeeded) -> str:
        """After an answer of "always": kept in ``mcp-approved.json`` (else why not)."""
        if event.answer.done() and event.answer.result().decision == "always":
            return save_approved(self.config_file, self.policy.always | {event.call.name})
        return ""


def open_tools(config_file: Path, err: TextIO = sys.stderr) -> TerminalTools | None:
    """The tools of ``--mcp CONFIG`` (servers start when first used), or None."""
    try:
        config = load_config(config_file)
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return None
    policy = ApprovalPolicy(load_approved(config_file))
    return TerminalTools(ToolServerManager(config), policy, config_file)


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
        out.write(f"[{result.call.name or 'tool call'}: {result.kind}{cut}] {first}\n")
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


def tools_command(arg: str, app: ChatApp, tools: TerminalTools, out: TextIO) -> None:
    """``/tools``: start the servers and list them; ``on|off NAME…``; ``restart NAME``;
    ``revoke TOOL``."""
    verb, _, rest = arg.strip().partition(" ")
    manager, policy = tools.manager, tools.policy
    if verb == "restart":
        out.write(_status_line(manager.restart(rest.strip()).result(timeout=120)) + "\n")
        return
    if verb == "revoke":
        _revoke(rest.strip(), tools, out)
        return
    conversation = app.conversation_id
    assert conversation is not None
    if verb in ("on", "off"):
        manager.start_all(timeout_s=120)  # their tools named
        changed = app.tool_picks.switch(conversation, rest.split(), verb == "on")
        prefix = "error: " if isinstance(changed, EditRefused) else ""
        out.write(f"{prefix}{changed.message}\n")
        return
    if verb:
        out.write(f"unknown /tools {verb}; /help lists the tools commands\n")
        return
    pick = app.tool_picks.pick(conversation)
    for status in manager.start_all(timeout_s=120):
        off = " (off in this conversation)" if status.server in pick.off else ""
        out.write(_status_line(status) + off + "\n")
        for problem in status.problems:
            out.write(f"    {problem}\n")
        unpicked = [t.name for t in status.tools if not pick.offers(t)]
        if unpicked and not off:
            out.write(f"    off in this conversation: {', '.join(unpicked)}\n")
    always = sorted(policy.always)
    if always:
        out.write(f"always allowed: {', '.join(always)}\n")


def _revoke(name: str, tools: TerminalTools, out: TextIO) -> None:
    """A tool always allowed asks before each call again (kept in mcp-approved.json)."""
    if not name:
        out.write("error: /tools revoke takes a tool's name (/tools lists those always allowed)\n")
        return
    was_always = name in tools.policy.always
    tools.policy.revoke(name)
    failed = save_approved(tools.config_file, tools.policy.always) if was_always else ""
    if failed:
        out.write(f"error: {failed}; revoked for this session only\n")
    elif was_always:
        out.write(f"{name}: no longer always allowed; each call asks again\n")
    else:
        out.write(f"{name}: each call asks (it was not always allowed)\n")


def offered(manager: ToolServerManager) -> list[ToolInfo]:
    """The tools to offer the model: every ready server's, after starting them."""
    manager.start_all(timeout_s=120)
    return manager.tools()
