"""What a turn says when it goes without tools it was meant to have, once per cause.

A configured server that did not start (its command not found, exited at once, did
not answer in time) leaves its tools out of every turn; a turn that is to begin with
a tool call (tool choice "required") with no tool to call runs without one. Each
cause is said at the first turn it affects, and again only after it went away and
came back.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllmchat.core.tools.events import ServerStatus, ToolInfo, ToolsUnavailable

REQUIRED = "required"


def unavailable(
    statuses: Sequence[ServerStatus],
    offered: Sequence[ToolInfo],
    tool_choice: str,
    told: set[str],
) -> tuple[ToolsUnavailable | None, set[str]]:
    """The event to announce for this turn (None: nothing new), and the causes now told.

    ``statuses``: the enabled servers' states after starting them; ``offered``: the tools
    this turn offers; ``told``: the causes said before."""
    failed = [s for s in statuses if s.state == "failed"]
    causes = {f"failed:{s.server}:{s.message}": s for s in failed}
    required_unmet = tool_choice == REQUIRED and not offered
    working = any(s.state == "ready" for s in statuses)
    required_key = f"required:{'off' if working else 'none'}"
    now = set(causes) | ({required_key} if required_unmet else set())
    fresh = now - told
    if not fresh:
        return None, now
    sentences = [
        f"The MCP server {s.server!r} is not working ({s.message}): this chat goes on "
        "without its tools."
        for key, s in causes.items()
        if key in fresh
    ]
    if required_key in fresh:
        why = "every tool is off in this conversation" if working else "no MCP server is working"
        sentences.append(
            f"Each turn is to begin with a tool call (tool choice: required), but {why}: "
            "turns run without tools."
        )
    new_failed = tuple(s for key, s in causes.items() if key in fresh)
    event = ToolsUnavailable(" ".join(sentences), new_failed, required_key in fresh)
    return event, now
