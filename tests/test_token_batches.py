"""Tokens of several turns queued together cross the pipe as one message and reach
each turn's box in order; nothing else is merged with them."""

from __future__ import annotations

from collections import deque

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import DoneEvent, TurnStats
from vllmchat.core.engine.local.mailboxes import Mailboxes
from vllmchat.core.engine.process.serving.worker import _tokens_together


def test_one_turns_tokens_and_several_turns_tokens_are_put_together() -> None:
    assert _tokens_together([("tok", 3, "a", 1)]) == ("tok", 3, "a", 1)
    assert _tokens_together([("tok", 3, "a", 1), ("tok", 3, "b", 2)]) == (
        "toks",
        3,
        [("a", 1), ("b", 2)],
    )
    mixed = [("tok", 3, "a", 1), ("tok", 4, "x", 9), ("tok", 3, "b", 2)]
    assert _tokens_together(mixed) == ("tokset", 0, [(3, "a", 1), (4, "x", 9), (3, "b", 2)])


def test_several_turns_tokens_reach_each_box_in_order_then_their_ends() -> None:
    done = DoneEvent("ab", "max_tokens", TurnStats())
    pipe = deque(
        [
            ("tokset", 0, [(3, "a", 1), (4, "x", 9), (5, "gone", 7), (3, "b", 2)]),
            rq.TurnEvent(3, done),
            rq.TurnEvent(4, done),
        ]
    )
    boxes = Mailboxes(pipe.popleft)
    for rid in (3, 4):
        boxes.open(rid)  # 5 has no box: its token is dropped
    assert boxes.next(3) == ("toks", 3, [("a", 1), ("b", 2)])
    assert boxes.next(4) == ("toks", 4, [("x", 9)])
    assert boxes.next(3) == rq.TurnEvent(3, done)
    assert boxes.next(4) == rq.TurnEvent(4, done)
