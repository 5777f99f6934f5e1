"""Whether a slot step reads the clients' prompts: all its batch holds, except beside
the window's turn and while the app asks, where they wait; real llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmchat.core.engine import requests as rq
from vllmchat.core.settings import LoadSettings, SamplingSettings

GREEDY = SamplingSettings(
    temperature=0.0, max_tokens=8, ignore_eos=True, speculation="off", repeat_penalty=1.0
)
STORY = [{"role": "user", "content": "Lighthouses, ships and the sea at night. " * 30}]


@pytest.fixture
def loop(demo_model: Path):
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.inference.slots import SlotLoop
    from vllmchat.core.engine.process.inference.state_cache import StateCache

    rt = LlamaRuntime(LoadSettings(model_path=str(demo_model), n_ctx=512, api_slots=2))
    sent: list = []
    slots = SlotLoop(rt, StateCache(), sent.append, set())
    yield slots, sent
    slots.close()
    rt.close()


def _reply(slots, sent: list, rid: int, beside_window: bool) -> tuple[list[int], list[int]]:
    """(the reply's tokens, the prompt tokens in the cache after each step)."""
    slots.admit(rid, rq.SlotChat(STORY, GREEDY, client=f"c{rid}", reuse=False))
    read: list[int] = []
    while slots.busy:
        slots.step(beside_window=beside_window)
        read += [s.turn.at for s in slots.slots if s.turn is not None]
    done = [m for m in sent if isinstance(m, rq.TurnEvent) and m.rid == rid][-1].event
    return list(done.token_ids), read


def test_a_step_reads_the_whole_prompt_its_batch_holds(loop) -> None:
    slots, sent = loop
    assert not slots.overlap  # the CPU computes in the call
    _, read = _reply(slots, sent, 1, beside_window=False)
    assert read[0] > 300  # one step (the last prompt token is read with the first sample)


def test_beside_the_window_prompts_wait_and_the_reply_is_the_same_after(loop) -> None:
    slots, sent = loop
    whole, _ = _reply(slots, sent, 1, beside_window=False)
    slots.admit(2, rq.SlotChat(STORY, GREEDY, client="c2", reuse=False))
    for _ in range(3):
        assert not slots.step(beside_window=True)  # nothing to decode: the prompt waits
    assert slots.slots[0].turn is not None and slots.slots[0].turn.at == 0
    while slots.busy:
        slots.step()  # the window is done: the prompt is read as it would have been
    done = [m for m in sent if isinstance(m, rq.TurnEvent) and m.rid == 2][-1].event
    assert list(done.token_ids) == whole


def test_where_the_gpu_computes_after_the_call_prompts_do_not_wait() -> None:
    from vllmchat.core.engine.process.inference.slot_pace import prompt_room

    assert prompt_room(512, beside_window=True, computes_in_call=False) == 512
    assert prompt_room(512, beside_window=True, computes_in_call=True) == 0
    assert prompt_room(512, beside_window=False, computes_in_call=True) == 512


def test_the_calls_a_window_turn_starts_with_wait_for_one_step_at_most(
    make_client, demo_model
) -> None:
    """A window's turn starts with a few calls (render, resume): the first waits for the
    step in flight (a 512-token chunk of a long API prompt), the next ones for none:
    the prompt waits meanwhile."""
    import threading
    import time

    from vllmchat.core.engine.api_states import ApiSlot
    from vllmchat.core.engine.events import DoneEvent

    client = make_client()
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=2048, api_slots=2))
    story = [{"role": "user", "content": "Lighthouses, ships and the sea at night. " * 160}]
    events: list = []
    reading = threading.Thread(
        target=lambda: events.extend(client.chat(story, GREEDY, slot=ApiSlot("long", reuse=False)))
    )
    reading.start()
    time.sleep(0.3)  # its first 512-token chunk is being read
    waits = []
    for _ in range(3):
        t0 = time.monotonic()
        client.call(rq.Render([{"role": "user", "content": "Hello there!"}]))
        waits.append(time.monotonic() - t0)
    reading.join(300)
    assert isinstance(events[-1], DoneEvent) and events[-1].stats.prompt_tokens > 1500
    assert max(waits[1:]) < 0.3, waits  # a 512-token step takes 1.5 s or more here
