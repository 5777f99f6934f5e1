"""What the tools layer announces: servers' states, tool calls and their outcomes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

ServerState = Literal["stopped", "starting", "ready", "failed"]

OutcomeKind = Literal[
    "ok",
    "tool_error",  # the tool ran and said it failed (isError)
    "timeout",  # no answer within the call's timeout
    "server_failed",  # the server could not be started or is not ready
    "server_crashed",  # the server went away during the call
    "unknown_tool",  # the model named a tool that is not offered
    "invalid_arguments",  # the arguments do not fit the tool's schema
    "malformed_call",  # the model's call is not valid JSON / not a call
    "denied",  # the user said no
    "repeated",  # the same call again in this turn: a loop
    "step_limit",  # the turn used all its tool steps
]

_NAME_RE = re.compile(r"[^A-Za-z0-9_-]+")


def model_tool_name(server: str, tool: str) -> str:
    """The name the model sees: ``server_tool``, as llama.cpp's server names MCP tools."""
    return _NAME_RE.sub("_", f"{server}_{tool}")[:64]


@dataclass(frozen=True)
class ToolInfo:
    """One tool of a ready server."""

    server: str
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        return model_tool_name(self.server, self.name)

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry that chat templates and servers take."""
        return {
            "type": "function",
            "function": {
                "name": self.model_name,
                "description": self.description,
                "parameters": dict(self.input_schema) or {"type": "object", "properties": {}},
            },
        }


@dataclass(frozen=True)
class ServerStatus:
    """A server's state: starting, ready (with tools), or failed (why, and its stderr's tail)."""

    server: str
    state: ServerState
    tools: tuple[ToolInfo, ...] = ()
    message: str = ""
    stderr_tail: str = ""
    problems: tuple[str, ...] = ()  # tools left out, and why (an invalid schema)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.server,
            "state": self.state,
            "tools": [t.name for t in self.tools],
            "message": self.message,
            "stderr_tail": self.stderr_tail,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class ToolCall:
    """A call the model made: the tool's model-facing name and its arguments."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str = ""

    def key(self) -> str:
        """The same call, whatever the order of its arguments."""
        return self.name + json.dumps(self.arguments, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class ToolResult:
    """How a call ended; ``text`` is what the model is shown."""

    call: ToolCall
    kind: OutcomeKind
    text: str
    truncated: bool = False
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


Decision = Literal["once", "conversation", "always", "deny"]


@dataclass(frozen=True)
class Approval:
    """The user's answer to a call; a denial's ``reason`` is shown to the model."""

    decision: Decision
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision != "deny"


@dataclass(frozen=True)
class ApprovalNeeded:
    """A call waits for the user: once, for this conversation, or always for this tool.

    The front end shows the tool and its arguments and sets ``answer``'s result.
    """

    call: ToolCall
    tool: ToolInfo
    answer: Future[Approval] = field(default_factory=Future, compare=False)


@dataclass(frozen=True)
class ToolCallStarted:
    """An allowed call goes to its server."""

    call: ToolCall
    tool: ToolInfo


@dataclass(frozen=True)
class ToolCallFinished:
    """How a call ended (run, denied, failed, ...)."""

    result: ToolResult


@dataclass(frozen=True)
class ToolsUnavailable:
    """A turn runs without tools it was meant to have: servers that did not start, or no
    working server where each turn is to begin with a call (said once per cause)."""

    message: str
    failed: tuple[ServerStatus, ...] = ()
    required_unmet: bool = False


@dataclass(frozen=True)
class ApprovalRevoked:
    """A tool always allowed asks before each call again; ``failed``: why the file
    that keeps the always-allowed tools could not be written ("" when it was)."""

    tool: str
    was_always: bool
    failed: str = ""


@dataclass(frozen=True)
class ToolsConfigProblem:
    """The MCP config could not be used (missing, unreadable, broken): no tools offered."""

    path: str
    message: str


@dataclass(frozen=True)
class ToolStepPrompted:
    """A tool step as it went into the prompt: the model's call as it wrote it (with
    its sampled ids), then the messages that carried the results back."""

    messages: tuple[dict[str, str], ...]
    reply_ids: tuple[int, ...] = ()


ToolEvent = ServerStatus | ApprovalNeeded | ToolCallFinished | ToolStepPrompted
"""What a turn with tools yields among the engine's events."""

ToolServiceEvent = (
    ServerStatus
    | ApprovalNeeded
    | ToolCallStarted
    | ToolCallFinished
    | ToolsUnavailable
    | ToolsConfigProblem
    | ApprovalRevoked
)
"""What the application layer's tools service announces to its subscribers."""
