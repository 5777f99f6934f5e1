"""The slot loop where a step's tokens are sent after the next step is queued (the
GPU's order, forced here): what is sent, and when; real llama.cpp in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.token_messages import sent_tokens
from vllmchat.core.engine import requests as rq
from vllmchat.core.settings import LoadSettings, SamplingSettings

GREEDY = SamplingSettings(
    temperature=0.0, max_tokens=6, ignore_eos=True, speculation="off", repeat_penalty=1.0
)


@pytest.fixture
def loop(demo_model: Path):
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.inference.slots import SlotLoop
    from vllmchat.core.engine.process.inference.state_cache import StateCache

    rt = LlamaRuntime(LoadSettings(model_path=str(demo_model), n_ctx=256, api_slots=2))
    sent: list = []
    slots = SlotLoop(rt, StateCache(), sent.append, set())
    slots.overlap = True
    yield slots, sent
    slots.close()
    rt.close()


def _chat(k: int) -> rq.SlotChat:
    messages = [{"role": "user", "content": f"Client {k}: name a river."}]
    return rq.SlotChat(messages, GREEDY, client=f"c{k}", reuse=False)


def _tokens(sent: list, rid: int) -> list[int]:
    return [token for _, r, token in sent_tokens(sent) if r == rid and token >= 0]


def test_a_sampled_token_waits_only_for_the_next_launch(loop) -> None:
    slots, sent = loop
    slots.admit(1, _chat(1))
    while not slots.unsent:
        slots.step()
    first = slots.unsent[0][1]
    assert _tokens(sent, 1) == []  # sampled, held for the next step's launch
    slots.step()
    assert _tokens(sent, 1)[0] == first


def test_a_new_turn_does_not_hold_back_the_tokens_already_sampled(loop) -> None:
    slots, sent = loop
    slots.admit(1, _chat(1))
    while not slots.unsent:
        slots.step()
    held = [token for _, token in slots.unsent]
    slots.admit(2, _chat(2))  # its prompt is rendered and planned after they go
    assert _tokens(sent, 1) == held and not slots.unsent


def test_every_token_is_sent_once_in_order_before_the_turn_ends(loop) -> None:
    slots, sent = loop
    slots.admit(1, _chat(1))
    slots.admit(2, _chat(2))
    while slots.busy:
        slots.step()
    assert not slots.unsent
    for rid in (1, 2):
        events = [m for m in sent if isinstance(m, rq.TurnEvent) and m.rid == rid]
        done = events[-1].event
        assert _tokens(sent, rid) == list(done.token_ids) and len(done.token_ids) == 6
        last_token = max(i for i, r, _ in sent_tokens(sent) if r == rid)
        assert last_token < sent.index(events[-1])


def test_a_turns_state_is_copied_after_its_last_events(loop, monkeypatch) -> None:
    """The end of a reply never waits for its state's bytes (on a GPU 15 ms for an 8B
    model's 150 tokens); the state is in RAM by the time the step is over."""
    from vllmchat.core.engine.process.inference import slot_fill

    slots, sent = loop
    copies: list[int] = []
    real = slot_fill.seq_state

    def copied(ctx, seq):
        copies.append(len(sent))
        return real(ctx, seq)

    monkeypatch.setattr(slot_fill, "seq_state", copied)
    slots.admit(1, _chat(1))
    slots.admit(2, _chat(2))
    while slots.busy:
        slots.step()
    dones = [i for i, m in enumerate(sent) if isinstance(m, rq.TurnEvent) and m.rid in (1, 2)]
    assert len(copies) == 2 and min(copies) > max(dones)  # both replies ended first
    kept = {s.key: s for s in slots.cache.snapshot().states}
    assert kept["c1"].size > 0 and kept["c1"].where == "ram"
    assert slots.cache.state("c1") is not None and slots.cache.state("c1").data
