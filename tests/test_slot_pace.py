"""How much of a prompt a slot step reads: all its batch holds, except beside the
window's turn (a chunk of about ``BESIDE_WINDOW_S``); real llama.cpp in this process."""

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


def test_a_step_reads_the_whole_prompt_its_batch_holds_and_times_it(loop) -> None:
    slots, sent = loop
    assert slots.pace.measures and slots.pace.token_s == 0.0  # the CPU computes in the call
    _, read = _reply(slots, sent, 1, beside_window=False)
    assert read[0] > 300  # one step (the last prompt token is read with the first sample)
    assert slots.pace.token_s > 0.0


def test_beside_the_window_a_step_reads_a_short_chunk_and_the_reply_is_the_same(loop) -> None:
    from vllmchat.core.engine.process.inference.slot_pace import BESIDE_WINDOW_S, MIN_CHUNK

    slots, sent = loop
    whole, _ = _reply(slots, sent, 1, beside_window=False)
    slots.pace.token_s = BESIDE_WINDOW_S / 40  # as if 40 tokens took the window's share
    slots.pace.measures = False  # keep it so
    paced, read = _reply(slots, sent, 2, beside_window=True)
    assert read[:3] == [40, 80, 120]
    assert paced == whole  # the same reply from a prompt read in chunks
    slots.pace.token_s = 1.0  # a very slow machine: still MIN_CHUNK a step
    _, read = _reply(slots, sent, 3, beside_window=True)
    assert read[0] == MIN_CHUNK


def test_where_tokens_go_out_during_the_next_step_the_pace_is_not_timed() -> None:
    from vllmchat.core.engine.process.inference.slot_pace import PrefillPace

    pace = PrefillPace(measures=False)  # llama_decode returns before the GPU is done
    pace.timed(400, 0.01)
    assert pace.token_s == 0.0 and pace.chunk(512, beside_window=True) == 512
    pace = PrefillPace(measures=True)
    pace.timed(8, 0.5)  # a decode step of 8 rows says little of a prompt's token
    assert pace.token_s == 0.0
    pace.timed(100, 0.5)
    assert pace.chunk(512, beside_window=False) == 512
    assert pace.chunk(512, beside_window=True) == 16  # 0.05 s at 5 ms a token is 10
