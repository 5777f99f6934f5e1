"""A turn with tools: the model calls, the user approves, the result goes back, until it answers.

Each model step is one engine turn over the whole conversation; the engine reuses
the common prefix of its KV cache, so a tool step prefills only the call's result
and the template's tokens around it (the call itself was sampled there, and the
reply is kept as the exact text the model wrote so its ids match). The tools come
first in the prompt (the template's tool block, or the system message for a
template without a tool format) and do not change within a conversation: a stable
prefix, reused across turns and restarts. A template without a tool format may be
asked for a grammar-constrained call (``tool_choice="required"``); its model then
answers the results in plain text (a grammar too), and so does any model whose turn
ran out of tool steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, cast

from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event, TurnStats
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.media_text import neutralise
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.tools.approval import ApprovalPolicy, TurnGuard, tool_step
from vllmchat.core.tools.calls import parse_reply
from vllmchat.core.tools.events import ToolCall, ToolEvent, ToolInfo, ToolResult
from vllmchat.core.tools.manager import ToolServerManager
from vllmchat.core.tools.prompting import (
    TEXT_GRAMMAR,
    call_schema,
    fallback_system_prompt,
    openai_tools,
    result_message,
)

ToolChoice = Literal["auto", "required", "none"]
Message = Mapping[str, str]


class ToolEngine(Protocol):
    """What a tool turn needs from the engine."""

    @property
    def info(self) -> ModelInfo | None: ...

    def chat(
        self,
        messages: Sequence[Message],
        sampling: SamplingSettings | None = None,
        images: Sequence[bytes] = (),
        *,
        tools: str | None = None,
        json_schema: str | None = None,
        grammar: str | None = None,
    ) -> Iterator[Event]: ...


@dataclass(frozen=True)
class ToolTurnDone:
    """How the turn ended: the answer, the messages it added, each step's cost."""

    text: str
    added: tuple[Message, ...]
    results: tuple[ToolResult, ...] = ()
    step_stats: tuple[TurnStats, ...] = ()
    loop_stopped: bool = False
    error: ErrorEvent | None = None


@dataclass
class ToolTurn:
    """One user turn with tools offered; ``run`` yields engine and tool events."""

    engine: ToolEngine
    tools: Sequence[ToolInfo]
    run_call: Callable[[ToolInfo, ToolCall], ToolResult]
    policy: ApprovalPolicy
    conversation: str
    max_steps: int = 8
    tool_choice: ToolChoice = "auto"
    should_stop: Callable[[], bool] = lambda: False
    _by_name: dict[str, ToolInfo] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._by_name = {t.model_name: t for t in self.tools}

    @property
    def has_format(self) -> bool:
        info = self.engine.info
        return info is not None and bool(info.tool_format)

    def prompt(self, messages: Sequence[Message]) -> tuple[list[Message], str | None]:
        """The messages to send, and the ``tools`` JSON for a template with a tool format."""
        if not self.tools or self.tool_choice == "none":
            return list(messages), None
        if self.has_format:
            listed = json.dumps(openai_tools(self.tools), ensure_ascii=False)
            return list(messages), neutralise(listed)  # the marker is never JSON syntax
        described = neutralise(fallback_system_prompt(self.tools))
        if messages and messages[0]["role"] == "system":
            first = {"role": "system", "content": f"{described}\n\n{messages[0]['content']}"}
            return [first, *messages[1:]], None
        return [{"role": "system", "content": described}, *messages], None

    def run(
        self,
        messages: Sequence[Message],
        sampling: SamplingSettings | None = None,
        images: Sequence[bytes] = (),
    ) -> Generator[Event | ToolEvent, None, ToolTurnDone]:
        """Answer the last message, calling tools as the model asks and the user allows;
        ``images``: one per marker in ``messages``, sent with every step."""
        guard = TurnGuard(self.max_steps)
        history = list(messages)
        added: list[Message] = []
        results: list[ToolResult] = []
        stats: list[TurnStats] = []
        choice = self.tool_choice
        answer_now = False
        while True:
            prompt, tools = self.prompt(history)
            schema = grammar = None
            if answer_now:
                grammar = TEXT_GRAMMAR
            elif choice == "required" and not self.has_format and self.tools:
                schema = json.dumps(call_schema(self.tools))
            done: DoneEvent | None = None
            if images:
                chat = self.engine.chat(
                    prompt, sampling, images, tools=tools, json_schema=schema, grammar=grammar
                )
            else:  # as before: an engine that takes no images keeps working
                chat = self.engine.chat(
                    prompt, sampling, tools=tools, json_schema=schema, grammar=grammar
                )
            for event in chat:
                yield event
                if isinstance(event, ErrorEvent):
                    return ToolTurnDone("", tuple(added), tuple(results), tuple(stats), error=event)
                if isinstance(event, DoneEvent):
                    done = event
            if done is None:
                return ToolTurnDone("", tuple(added), tuple(results), tuple(stats))
            stats.append(done.stats)
            reply: Message = {"role": "assistant", "content": neutralise(done.text)}
            history.append(reply)
            added.append(reply)
            parsed = parse_reply(done.text)
            if not parsed.has_calls or done.partial or guard.stopped:
                return ToolTurnDone(
                    parsed.content if parsed.has_calls else done.text,
                    tuple(added),
                    tuple(results),
                    tuple(stats),
                    loop_stopped=guard.stopped,
                )
            if choice == "required" and not self.has_format:
                answer_now = True  # a constrained call, then a plain answer
            choice = "auto"  # a required call is required once
            step_results = yield from self._run_calls(parsed.calls, parsed.malformed, guard)
            answer_now = answer_now or (guard.stopped and not self.has_format)
            results.extend(step_results)
            for result in step_results:
                message = result_message(
                    neutralise(result.text),
                    call_id=result.call.call_id,
                    name=result.call.name,
                    has_format=self.has_format,
                )
                history.append(message)
                added.append(message)

    def _run_calls(
        self, calls: Sequence[ToolCall], malformed: Sequence[str], guard: TurnGuard
    ) -> Generator[ToolEvent, None, list[ToolResult]]:
        results: list[ToolResult] = []
        for n, why in enumerate(malformed):
            bad = ToolCall("", {}, f"malformed_{n}")
            results.append(
                ToolResult(bad, "malformed_call", f"The tool call could not be read: {why}.")
            )
        for call in calls:
            result = yield from tool_step(
                call,
                find_tool=self._by_name.get,
                run=self.run_call,
                policy=self.policy,
                conversation=self.conversation,
                guard=guard,
                should_stop=self.should_stop,
            )
            results.append(result)
            if result.kind == "step_limit":
                break
        return results


def tool_stream(
    engine: object,
    manager: ToolServerManager,
    policy: ApprovalPolicy,
    conversation: str,
    should_stop: Callable[[], bool],
    *,
    max_steps: int = 8,
    tool_choice: ToolChoice = "auto",
) -> Callable[
    [list[dict[str, str]], SamplingSettings, Sequence[bytes]], Iterator[Event | ToolEvent]
]:
    """A chat session's turn with the manager's tools (its servers start at the first)."""

    def run_call(tool: ToolInfo, call: ToolCall) -> ToolResult:
        return manager.call(tool, call).result()

    def stream(
        prompt: list[dict[str, str]], sampling: SamplingSettings, images: Sequence[bytes] = ()
    ) -> Iterator[Event | ToolEvent]:
        manager.start_stopped()
        turn = ToolTurn(
            cast(ToolEngine, engine),
            manager.tools(),
            run_call,
            policy,
            conversation,
            max_steps=max_steps,
            tool_choice=tool_choice,
            should_stop=should_stop,
        )
        yield from turn.run(prompt, sampling, images)

    return stream
