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
from vllmchat.core.app.tools.service import ToolsService
from vllmchat.core.app.tools.turns import ToolChoice
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolServiceEvent,
    ToolsUnavailable,
)

TOOLS_HELP = """  /tools          the MCP servers and their tools (started now), on or off here
  /tools on NAME… / off NAME…   offer a server or tool in this conversation, or not
  /tools restart NAME   start a server again   /tools revoke TOOL   ask before each call again"""

PROMPT = "allow? [o]nce, [c]onversation, [a]lways for this tool, [n]o (a reason may follow): "


@dataclass
class TerminalTools:
    """The terminal's side of the app's tools service: each call asked about at the
    prompt, each outcome printed, a turn without its tools said once."""

    service: ToolsService
    out: TextIO
    read_line: Callable[[], str] = sys.stdin.readline

    def __call__(self, event: ToolServiceEvent) -> None:
        """A handler of the service's events (on the turn's thread, or the service's)."""
        if isinstance(event, ApprovalNeeded):
            failed = self.service.answer(event, ask_approval(event, self.out, self.read_line))
            if failed:
                self.out.write(f"[allowed for this session only: {failed}]\n")
        elif isinstance(event, ToolCallFinished):
            result = event.result
            first = result.text.strip().splitlines()[0][:160] if result.text.strip() else ""
            cut = " (cut)" if result.truncated else ""
            self.out.write(f"[{result.call.name or 'tool call'}: {result.kind}{cut}] {first}\n")
        elif isinstance(event, ToolsUnavailable):
            self.out.write(f"[tools: {event.message}]\n")
        else:
            return
        self.out.flush()

    def remember(self, _event: object) -> str:
        """Nothing left to keep: the service keeps an "always" as it is answered."""
        return ""

    def close(self) -> None:
        """Stop listening and stop the servers."""
        self.service.unsubscribe(self)
        self.service.close()


def open_tools(
    app: ChatApp,
    config_file: Path,
    tool_choice: ToolChoice = "auto",
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> TerminalTools | None:
    """The tools of ``--mcp CONFIG`` offered in the chat (servers start when first
    used), or None with the reason printed (a file that does not exist is named)."""
    problem = app.use_tools(config_file, must_exist=True, tool_choice=tool_choice)
    if problem is not None:
        print(f"error: {problem.message}", file=err)
        return None
    tools = TerminalTools(app.tools, out)
    app.tools.subscribe(tools)
    return tools


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
    """True for a tool step in a turn's events: the tools service's handler has told it
    (``TerminalTools``), so nothing is printed here; False for other events."""
    return isinstance(event, ApprovalNeeded | ToolCallFinished | ServerStatus)


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
    service = tools.service
    if verb == "restart":
        out.write(_status_line(service.restart(rest.strip()).result(timeout=120)) + "\n")
        return
    if verb == "revoke":
        _revoke(rest.strip(), tools, out)
        return
    conversation = app.conversation_id  # None: the new chat, stored at its first message
    if verb in ("on", "off"):
        service.start_all(timeout_s=120)  # their tools named
        changed = app.tool_picks.switch(conversation, rest.split(), verb == "on")
        prefix = "error: " if isinstance(changed, EditRefused) else ""
        out.write(f"{prefix}{changed.message}\n")
        return
    if verb:
        out.write(f"unknown /tools {verb}; /help lists the tools commands\n")
        return
    pick = app.tool_picks.pick(conversation)
    for status in service.start_all(timeout_s=120):
        off = " (off in this conversation)" if status.server in pick.off else ""
        out.write(_status_line(status) + off + "\n")
        for problem in status.problems:
            out.write(f"    {problem}\n")
        unpicked = [t.name for t in status.tools if not pick.offers(t)]
        if unpicked and not off:
            out.write(f"    off in this conversation: {', '.join(unpicked)}\n")
    always = sorted(service.policy.always)
    if always:
        out.write(f"always allowed: {', '.join(always)}\n")


def _revoke(name: str, tools: TerminalTools, out: TextIO) -> None:
    """A tool always allowed asks before each call again (kept in mcp-approved.json)."""
    if not name:
        out.write("error: /tools revoke takes a tool's name (/tools lists those always allowed)\n")
        return
    revoked = tools.service.revoke(name)
    if revoked.failed:
        out.write(f"error: {revoked.failed}; revoked for this session only\n")
    elif revoked.was_always:
        out.write(f"{name}: no longer always allowed; each call asks again\n")
    else:
        out.write(f"{name}: each call asks (it was not always allowed)\n")
