"""One API request's turn on the engine: in a slot of its own, from its client's kept
KV state (the engine finds and keeps it), the reply streamed in whole characters with
stop strings held back.

``ApiChat`` is a request as the server front end parsed it; ``run_api_turn`` yields
``ApiText`` pieces and ends with ``ApiDone`` or ``ApiFailed``. Closing the iterator
(a client that left) stops the engine within one token.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vllmchat.core.app.serving.api_tools import NO_TOOLS, OfferedTools, openai_calls, reply_calls
from vllmchat.core.engine.api_states import (
    ApiSlot,
    RunsSlots,
    ServesRequests,
    StatesChanged,
    StatesEvent,
)
from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, TokenEvent
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.engine.requests import Render
from vllmchat.core.settings import SamplingSettings


@dataclass(frozen=True)
class ApiChat:
    """A chat request, parsed: messages (images at ``MEDIA_MARKER``), sampling, extras."""

    messages: tuple[Mapping[str, str], ...]
    sampling: SamplingSettings
    options: ChatOptions = PLAIN
    tools: OfferedTools = NO_TOOLS
    client: str | None = None  # the client's own name for its state
    stop: tuple[str, ...] = ()
    label: str = ""  # for the request log


@dataclass(frozen=True)
class Usage:
    """Tokens of a turn, as OpenAI counts them; ``cached`` were read from a saved state."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0


@dataclass(frozen=True)
class ApiText:
    """A piece of the reply (whole characters; never part of a stop string)."""

    text: str


@dataclass(frozen=True)
class ApiDone:
    """The reply: its whole text (what ``ApiText`` did not carry yet is sent with it),
    why it ended ("stop", "length", "tool_calls"), its cost."""

    text: str
    finish_reason: str
    usage: Usage
    tool_calls: tuple[dict[str, Any], ...] = ()
    client_key: str = ""
    decode_tok_s: float = 0.0
    ttft_s: float = 0.0  # the engine's: from its turn's start to the first token
    place_s: float = 0.0  # the prompt rendered and the client's state made live


@dataclass(frozen=True)
class ApiFailed:
    """The turn could not be answered; ``kind`` chooses the HTTP status."""

    kind: ErrorKind
    message: str
    partial_text: str = ""


ApiEvent = ApiText | ApiDone | ApiFailed


@dataclass
class _Held:
    """Reply text not sent yet: it may be the start of a stop string, or (where tools
    are offered) of a call, which is read from the whole reply."""

    stops: Sequence[str]
    calls_possible: bool = False
    text: str = ""
    sent: int = 0
    hit: bool = False
    call_from: int = -1  # where a call may begin (held from there to the end)

    def add(self, piece: str) -> str:
        """Take a piece; return what can be sent now."""
        self.text += piece
        for stop in self.stops:
            at = self.text.find(stop, max(0, self.sent - len(stop)))
            if at >= 0:
                self.text, self.hit = self.text[:at], True
        if self.calls_possible and self.call_from < 0:
            marks = [i for i in (self.text.find(c, self.sent) for c in CALL_STARTS) if i >= 0]
            self.call_from = min(marks, default=-1)
        keep = 0 if self.hit else max((_partial(self.text, s) for s in self.stops), default=0)
        end = len(self.text) - keep
        if self.call_from >= 0:
            end = min(end, self.call_from)
        ready = self.text[self.sent : max(end, self.sent)]
        self.sent += len(ready)
        return ready


CALL_STARTS = ("<", "[", "{", "to=")  # where each call format's marker or JSON begins


def _partial(text: str, stop: str) -> int:
    """Length of the longest end of ``text`` that begins ``stop``."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if stop.startswith(text[-n:]):
            return n
    return 0


def render_prompt(engine: ServesRequests, request: ApiChat) -> list[int]:
    """The prompt's token ids, as the turn will prefill them."""
    ids: list[int] = engine.call(
        Render(
            [dict(m) for m in request.messages],
            tuple(request.options.images),
            request.options.tools,
            request.sampling.thinking,
            request.options.raw,
        )
    )
    return ids


def prompt_length(engine: Engine, request: ApiChat) -> int:
    """Tokens of ``request``'s prompt (an engine that renders no ids of its own, a
    remote one, estimates them)."""
    if isinstance(engine, ServesRequests):
        return len(render_prompt(engine, request))
    return len(engine.render([dict(m) for m in request.messages]))


def run_api_turn(
    engine: Engine,
    request: ApiChat,
    *,
    slot: ApiSlot | None = None,
    on_states: Callable[[StatesChanged], None] = lambda states: None,
    ticket: int = 0,
) -> Iterator[ApiEvent]:
    """Answer ``request`` (the caller holds its share of the engine's queue); with
    ``slot``, in an API slot of its own, from its client's kept state (``ticket``:
    what ``stop_slot`` names it by; ``on_states`` hears the states after)."""
    key, place_s = request.client or "", 0.0
    held = _Held(request.stop, calls_possible=request.tools.active)
    messages, sampling, options = list(request.messages), request.sampling, request.options
    slotted = slot is not None and ticket > 0 and isinstance(engine, RunsSlots)
    if slot is not None and isinstance(engine, RunsSlots):
        stream = engine.chat(messages, sampling, options, slot=slot, ticket=ticket)
    else:
        stream = engine.chat(messages, sampling, options)
    done: DoneEvent | None = None
    try:
        for event in stream:
            if isinstance(event, TokenEvent):
                if held.hit:
                    continue  # stopped: the slot's last events (its state) still come
                ready = held.add(event.text)
                if ready:
                    yield ApiText(ready)
                if held.hit and slotted:
                    assert isinstance(engine, RunsSlots)
                    engine.stop_slot(ticket)  # leaves at the next step, its state kept
                elif held.hit:
                    break
            elif isinstance(event, DoneEvent):
                done = event
            elif isinstance(event, StatesEvent):
                key, place_s = event.kept_as, event.place_s
                on_states(event.states)
            elif isinstance(event, ErrorEvent):
                yield ApiFailed(event.kind, event.message, held.text)
                return
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # a client that left: the engine stops within one token
    yield replace(_done(request, held, done, key), place_s=place_s)


def _done(request: ApiChat, held: _Held, done: DoneEvent | None, key: str) -> ApiDone:
    stats = done.stats if done is not None else None
    usage = Usage(
        stats.prompt_tokens if stats else 0,
        stats.decode_tokens if stats else 0,
        stats.tokens_reused if stats else 0,
    )
    text = held.text if held.hit or done is None else _cut(done.text, request.stop)
    reason = (
        "length"
        if done is not None and done.stop_reason in ("max_tokens", "context_full")
        else "stop"
    )
    parsed = reply_calls(text, request.tools)
    if parsed is not None:
        return ApiDone(
            parsed.content,
            "tool_calls",
            usage,
            tuple(openai_calls(parsed)),
            key,
            stats.decode_tok_s if stats else 0.0,
            stats.ttft_s if stats else 0.0,
        )
    return ApiDone(
        text,
        reason,
        usage,
        (),
        key,
        stats.decode_tok_s if stats else 0.0,
        stats.ttft_s if stats else 0.0,
    )


def _cut(text: str, stops: Sequence[str]) -> str:
    for stop in stops:
        at = text.find(stop)
        if at >= 0:
            text = text[:at]
    return text


def schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False)
