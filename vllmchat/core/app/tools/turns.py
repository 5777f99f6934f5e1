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
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event, TurnStats
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.media_text import neutralise
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.tools.approval import ApprovalPolicy, TurnGuard, tool_step
from vllmchat.core.tools.calls import parse_reply
from vllmchat.core.tools.events import (
    ToolCall,
    ToolCallFinished,
    ToolEvent,
    ToolInfo,
    ToolResult,
    ToolStepPrompted,
)
from vllmchat.core.tools.prompting import (
    TEXT_GRAMMAR,
    call_schema,
    fallback_system_prompt,
    openai_tools,
    result_message,
)

ToolChoice = Literal["auto", "required", "none"]
MIN_RESULT_CHARS = 400  # a result is never cut shorter than this to fit the context
Message = Mapping[str, str]


class ToolEngine(Protocol):
    """What a tool turn needs from the engine."""

    @property
    def info(self) -> ModelInfo | None: ...

    def chat(
        self,
        messages: Sequence[Message],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = PLAIN,
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
    _used: int = field(init=False, default=0)  # tokens of the context the turn has used

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
            options = ChatOptions(
                images=tuple(images), tools=tools, json_schema=schema, grammar=grammar
            )
            chat = self.engine.chat(prompt, sampling, options)
            for event in chat:
                yield event
                if isinstance(event, ErrorEvent):
                    return ToolTurnDone("", tuple(added), tuple(results), tuple(stats), error=event)
                if isinstance(event, DoneEvent):
                    done = event
            if done is None:
                return ToolTurnDone("", tuple(added), tuple(results), tuple(stats))
            stats.append(done.stats)
            self._used = done.stats.prompt_tokens + done.stats.decode_tokens
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
            malformed = parsed.malformed
            if done.stop_reason in ("max_tokens", "context_full"):  # the call was cut off
                cut = "the reply reached its token limit (max tokens) before the call ended"
                malformed = tuple(f"{why}; {cut}" for why in malformed)
            step_results = yield from self._run_calls(parsed.calls, malformed, guard)
            answer_now = answer_now or (guard.stopped and not self.has_format)
            results.extend(step_results)
            carried = [
                result_message(
                    neutralise(result.text),
                    call_id=result.call.call_id,
                    name=result.call.name,
                    has_format=self.has_format,
                )
                for result in step_results
            ]
            history += carried
            added += carried
            yield ToolStepPrompted((dict(reply), *carried), tuple(done.token_ids))

    def _run_calls(
        self, calls: Sequence[ToolCall], malformed: Sequence[str], guard: TurnGuard
    ) -> Generator[ToolEvent, None, list[ToolResult]]:
        results: list[ToolResult] = []
        for n, why in enumerate(malformed):
            result = guard.malformed(ToolCall("", {}, f"malformed_{n}"), why)
            yield ToolCallFinished(result)  # shown: the turn goes on to the model's next step
            results.append(result)
            if result.kind == "step_limit":
                return results
        for call in calls:
            result = yield from tool_step(
                call,
                find_tool=self._by_name.get,
                run=lambda tool, call: self._fit(self.run_call(tool, call)),
                policy=self.policy,
                conversation=self.conversation,
                guard=guard,
                should_stop=self.should_stop,
            )
            results.append(result)
            if result.kind == "step_limit":
                break
        return results

    def _fit(self, result: ToolResult) -> ToolResult:
        """``result`` cut, with a note, to half the context left (the answer needs the
        rest): a character is counted as a token, the most it can take."""
        info = self.engine.info
        if info is None or info.n_ctx <= 0:
            return result
        limit = max(MIN_RESULT_CHARS, (info.n_ctx - self._used) // 2)
        size = len(result.text)
        if size > limit:
            note = (
                f"\n[The result was cut to {limit:,} of its {size:,} characters to fit the "
                f"context of {info.n_ctx:,} tokens.]"
            )
            result = replace(result, text=result.text[:limit] + note, truncated=True)
        self._used += min(size, limit)
        return result
