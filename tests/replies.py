"""Driving a streamed reply from a test."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from vllmchat.core.engine.events import TokenEvent


def act_after_tokens(events: Iterable[object], n: int, act: Callable[[], object]) -> list:
    """All of a reply's events, calling ``act()`` once ``n`` tokens have streamed."""
    seen: list = []
    tokens = 0
    for event in events:
        seen.append(event)
        tokens += isinstance(event, TokenEvent)
        if tokens == n and isinstance(event, TokenEvent):
            act()
    return seen
