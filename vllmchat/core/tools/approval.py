"""The user stays in charge: every call waits for approval; a turn has a step limit.

``tool_step`` is one call of a turn, as a generator: it yields ``ApprovalNeeded``
(unless this tool is already approved for the conversation, or always) and
``ToolCallFinished``, and returns the ``ToolResult`` the model is shown. An unknown
tool, a call repeated within the turn, a turn past its step limit and a denial
are outcomes too; none of them reaches a server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ToolCall,
    ToolCallFinished,
    ToolEvent,
    ToolInfo,
    ToolResult,
)

DEFAULT_MAX_STEPS = 8
_POLL_S = 0.1


class ApprovalPolicy:
    """Tools approved for a conversation, and tools always approved (saved by the owner)."""

    def __init__(self, always: Iterable[str] = ()) -> None:
        self._always = set(always)
        self._conversation: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    @property
    def always(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._always)

    def needs_approval(self, conversation: str, tool: str) -> bool:
        with self._lock:
            return tool not in self._always and tool not in self._conversation.get(conversation, ())

    def record(self, conversation: str, tool: str, approval: Approval) -> None:
        with self._lock:
            if approval.decision == "always":
                self._always.add(tool)
            elif approval.decision == "conversation":
                self._conversation.setdefault(conversation, set()).add(tool)

    def revoke(self, tool: str) -> None:
        with self._lock:
            self._always.discard(tool)
            for tools in self._conversation.values():
                tools.discard(tool)


class TurnGuard:
    """One turn's tool steps: a step limit, and the same call never run twice."""

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.max_steps = max_steps
        self.steps = 0
        self._seen: set[str] = set()
        self.stopped = False

    def _limit(self, call: ToolCall) -> ToolResult | None:
        if self.steps < self.max_steps:
            self.steps += 1
            return None
        self.stopped = True
        return ToolResult(
            call,
            "step_limit",
            f"The turn stopped after {self.max_steps} tool steps: no more tools are called. "
            "Answer with what you have.",
        )

    def malformed(self, call: ToolCall, why: str) -> ToolResult:
        """A call that could not be read: a step too (a model writing it again and again
        stops at the limit)."""
        stop = self._limit(call)
        if stop is not None:
            return stop
        how = 'Write it as {"name": ..., "arguments": {...}}, or answer in text.'
        return ToolResult(call, "malformed_call", f"The tool call could not be read: {why}. {how}")

    def check(self, call: ToolCall) -> ToolResult | None:
        """An outcome that ends this call before it runs, or None to go ahead."""
        stop = self._limit(call)
        if stop is not None:
            return stop
        key = call.key()
        if key in self._seen:
            return ToolResult(
                call,
                "repeated",
                f"{call.name} was already called with these arguments in this turn; "
                "its result is above. Do not call it again: answer with what you have.",
            )
        self._seen.add(key)
        return None


def wait_for(answer: Future[Approval], should_stop: Callable[[], bool]) -> Approval | None:
    """The user's answer, or None when the turn is stopped while waiting."""
    while not should_stop():
        try:
            return answer.result(timeout=_POLL_S)
        except FutureTimeout:
            continue
    return None


def tool_step(
    call: ToolCall,
    *,
    find_tool: Callable[[str], ToolInfo | None],
    run: Callable[[ToolInfo, ToolCall], ToolResult],
    policy: ApprovalPolicy,
    conversation: str,
    guard: TurnGuard,
    should_stop: Callable[[], bool] = lambda: False,
) -> Generator[ToolEvent, None, ToolResult]:
    """One call: checked, approved by the user, run; yields events, returns the result."""
    result = guard.check(call)
    tool = find_tool(call.name) if result is None else None
    if result is None and tool is None:
        result = ToolResult(call, "unknown_tool", f"There is no tool named {call.name!r}.")
    if result is None and tool is not None:
        approval: Approval | None = Approval("once")
        if policy.needs_approval(conversation, call.name):
            asked = ApprovalNeeded(call, tool)
            yield asked
            approval = wait_for(asked.answer, should_stop)
        if approval is None:
            result = ToolResult(
                call, "denied", "The turn was stopped before the call was approved."
            )
        elif not approval.allowed:
            reason = f" The user said: {approval.reason}" if approval.reason.strip() else ""
            result = ToolResult(call, "denied", f"The user did not allow this call.{reason}")
        else:
            policy.record(conversation, call.name, approval)
            result = run(tool, call)
    assert result is not None
    yield ToolCallFinished(result)
    return result
