"""A streamed reply told apart into thinking and answer as it comes: the answer's
tokens pass on, the thinking becomes ``ThinkingEvent``s, and ``ThoughtFor`` says
when it ended. Models without thinking pass through untouched."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

from vllmchat.core.conversations.events import ReplyEvent, ThinkingEvent, ThoughtFor
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event, TokenEvent
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.thinking import ThinkingSplitter


class ReplyParts:
    """What a reply has said so far: its answer, its thinking, how long it thought."""

    def __init__(self, info: ModelInfo | None) -> None:
        style = info.reasoning if info is not None else ""
        self.splitter = ThinkingSplitter(style, info.thinking_opens if info else False)
        self.started: float | None = None
        self.seconds = 0.0
        self._thought_told = False

    @property
    def answer(self) -> str:
        return "".join(self.splitter.answer)

    @property
    def thinking(self) -> str:
        return "".join(self.splitter.thinking).strip()

    def pass_on(self, event: Event) -> Iterator[ReplyEvent]:
        """``event`` as the front ends see it."""
        if isinstance(event, TokenEvent):
            for kind, text in self.splitter.feed(event.text):
                yield from self._piece(kind, text, event.token_id)
        elif isinstance(event, DoneEvent | ErrorEvent):
            for kind, text in self.splitter.finish():
                yield from self._piece(kind, text, -1)
            yield from self._end_thought()
            split = self.splitter.split()
            if isinstance(event, DoneEvent):
                yield replace(event, text=split.answer) if self.splitter.style else event
            else:
                partial = split.answer if self.splitter.style else event.partial_text
                yield replace(event, partial_text=partial)
        else:
            yield event

    def _piece(self, kind: str, text: str, token: int) -> Iterator[ReplyEvent]:
        if kind == "thinking":
            self.started = self.started or time.monotonic()
            yield ThinkingEvent(text)
            return
        yield from self._end_thought()
        yield TokenEvent(text, token)

    def _end_thought(self) -> Iterator[ThoughtFor]:
        if self.started is not None and not self._thought_told:
            self._thought_told = True
            self.seconds = time.monotonic() - self.started
            yield ThoughtFor(round(self.seconds, 1))
