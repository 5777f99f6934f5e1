"""Tokens of several turns queued together cross the pipe as one message and reach
each turn's box in order; nothing else is merged with them."""

from __future__ import annotations

from collections import deque

from tests.token_messages import sent_tokens
from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import DoneEvent, TurnStats
from vllmchat.core.engine.local.mailboxes import Mailboxes


def test_one_turns_tokens_and_several_turns_tokens_are_put_together() -> None:
    assert rq.tokens_message([("tok", 3, "a", 1)]) == ("tok", 3, "a", 1)
    assert rq.tokens_message([("tok", 3, "a", 1), ("tok", 3, "b", 2)]) == (
        "toks",
        3,
        [("a", 1), ("b", 2)],
    )
    mixed = [("tok", 3, "a", 1), ("tok", 4, "x", 9), ("tok", 3, "b", 2)]
    assert rq.tokens_message(mixed) == ("tokset", 0, [(3, "a", 1), (4, "x", 9), (3, "b", 2)])


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


def test_a_steps_tokens_of_several_turns_go_as_one_message(demo_model) -> None:
    """The CPU's order (tokens sent as the step is read): one message a step."""
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.inference.slots import SlotLoop
    from vllmchat.core.engine.process.inference.state_cache import StateCache
    from vllmchat.core.settings import LoadSettings, SamplingSettings

    greedy = SamplingSettings(
        temperature=0.0, max_tokens=5, ignore_eos=True, speculation="off", repeat_penalty=1.0
    )
    rt = LlamaRuntime(LoadSettings(model_path=str(demo_model), n_ctx=256, api_slots=3))
    sent: list = []
    slots = SlotLoop(rt, StateCache(), sent.append, set())
    slots.overlap = False
    try:
        for k in (1, 2, 3):
            ask = [{"role": "user", "content": f"Client {k}: name a river."}]
            slots.admit(k, rq.SlotChat(ask, greedy, client=f"c{k}", reuse=False))
        steps_with_three = 0
        while slots.busy:
            before = len(sent)
            slots.step()
            tokens = [m for m in sent[before:] if isinstance(m, tuple)]
            if any(isinstance(m, rq.TurnEvent) for m in sent[before:]):
                continue  # a turn's end: its last tokens go before its events
            assert len(tokens) == 1  # this step's tokens, all turns', in one message
            assert tokens[0][0] == "tokset" and {r for r, _, _ in tokens[0][2]} == {1, 2, 3}
            steps_with_three += 1
        assert steps_with_three >= 3
        for k in (1, 2, 3):
            done = [m for m in sent if isinstance(m, rq.TurnEvent) and m.rid == k][-1].event
            ids = [t for _, r, t in sent_tokens(sent) if r == k and t >= 0]
            assert ids == list(done.token_ids) and len(ids) == 5
    finally:
        slots.close()
        rt.close()
