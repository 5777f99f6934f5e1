"""API slots: turns of several clients in sequences of their own, batched in one
decode per step, beside the window's turn; real llama.cpp on the demo model."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from vllmchat.core.engine.api_states import ApiSlot, KeepStates, ListStates, SaveStates
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, TokenEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, max_tokens=24, ignore_eos=True, speculation="off")
TOPICS = ["rivers", "owls", "bread", "tides", "copper", "trains", "glaciers", "lamps"]


def _ask(k: int, reply: str = "") -> list[dict[str, str]]:
    """Client ``k``'s question; after ``reply``, its follow-up."""
    out = [{"role": "user", "content": f"Client {k}: tell me about {TOPICS[k % 8]}."}]
    if reply:
        out += [{"role": "assistant", "content": reply}, {"role": "user", "content": "More?"}]
    return out


def _turn(client, k: int, plan: ApiSlot, sampling=GREEDY, ticket: int = 0, **kw):
    """(token ids, the last event) of one slot turn."""
    ids, last = [], None
    for event in client.chat(_ask(k, **kw), sampling, slot=plan, ticket=ticket):
        if isinstance(event, TokenEvent) and event.token_id >= 0:
            ids.append(event.token_id)
        elif isinstance(event, DoneEvent | ErrorEvent):
            last = event
    return ids, last


def _at_once(client, plans: list[ApiSlot], sampling=GREEDY) -> list[tuple[list[int], object]]:
    out: list = [None] * len(plans)

    def run(i: int) -> None:
        out[i] = _turn(client, i, plans[i], sampling)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(plans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


@pytest.fixture
def slotted(make_client, demo_model: Path):
    """The demo model with 8 API slots of 512 tokens each."""
    client = make_client()
    info = client.load(LoadSettings(model_path=str(demo_model), n_ctx=512, api_slots=8))
    assert info.api_slots == 8 and info.n_ctx == 512
    return client


def test_a_greedy_reply_is_the_same_alone_and_beside_seven_others(slotted) -> None:
    alone, done = _turn(slotted, 0, ApiSlot("alone", reuse=False))
    assert isinstance(done, DoneEvent) and len(alone) == GREEDY.max_tokens
    together = _at_once(slotted, [ApiSlot(f"c{i}", reuse=False) for i in range(8)])
    assert all(isinstance(last, DoneEvent) for _, last in together)
    assert together[0][0] == alone
    assert len({tuple(ids) for ids, _ in together}) == 8  # each its own reply


def test_a_greedy_reply_is_the_same_fresh_and_from_its_kept_state(slotted) -> None:
    long = SamplingSettings(temperature=0.0, max_tokens=64, ignore_eos=True, speculation="off")
    system = "You are a careful assistant who writes long answers. " * 6
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Client 0: write a long story about rivers."},
    ]

    def turn(plan: ApiSlot) -> tuple[list[int], object]:
        events = list(slotted.chat(messages, long, slot=plan))
        ids = [e.token_id for e in events if isinstance(e, TokenEvent) and e.token_id >= 0]
        return ids, events[-1]

    fresh, first = turn(ApiSlot("same", reuse=False))
    again, second = turn(ApiSlot("same"))  # the same prompt again
    assert isinstance(first, DoneEvent) and isinstance(second, DoneEvent)
    assert second.stats.tokens_reused == first.stats.prompt_tokens - 1  # only the last token
    assert again == fresh


def test_a_reply_is_the_same_while_another_prompt_prefills_beside_it(slotted) -> None:
    long = SamplingSettings(temperature=0.0, max_tokens=48, ignore_eos=True, speculation="off")
    alone, _ = _turn(slotted, 4, ApiSlot("solo", reuse=False), long)
    story = [{"role": "user", "content": "Lighthouses, ships and the sea at night. " * 30}]
    other: list = []
    ids: list[int] = []
    for event in slotted.chat(_ask(4), long, slot=ApiSlot("beside", reuse=False)):
        if isinstance(event, TokenEvent) and event.token_id >= 0:
            ids.append(event.token_id)
            if len(ids) == 4:  # a prompt of about 300 tokens arrives mid-reply
                run = lambda: other.append(list(slotted.chat(story, GREEDY, slot=ApiSlot())))  # noqa: E731
                thread = threading.Thread(target=run)
                thread.start()
    thread.join(300)
    assert isinstance(other[0][-1], DoneEvent) and other[0][-1].stats.prompt_tokens > 200
    assert ids == alone


def test_a_returning_client_reads_only_what_is_new(slotted) -> None:
    _, first = _turn(slotted, 1, ApiSlot("back"))
    _, again = _turn(slotted, 1, ApiSlot("back"), reply=first.text)
    assert isinstance(first, DoneEvent) and isinstance(again, DoneEvent)
    assert again.stats.tokens_reused >= first.stats.prompt_tokens - 1
    assert "state: slot" in again.stats.note
    kept = {s.key: s for s in slotted.call(ListStates()).states}
    assert kept["back"].size > 0 and kept["back"].tokens == again.stats.kv_tokens


def test_a_client_whose_slot_was_taken_comes_back_from_ram(slotted) -> None:
    _, first = _turn(slotted, 2, ApiSlot("early"))
    _at_once(slotted, [ApiSlot(f"other-{i}") for i in range(8)])  # every slot taken
    _, back = _turn(slotted, 2, ApiSlot("early"), reply=first.text)
    assert isinstance(back, DoneEvent)
    assert "state: ram" in back.stats.note and back.stats.tokens_reused > 10


def test_a_stopped_turn_leaves_its_slot_within_a_step(slotted) -> None:
    long = SamplingSettings(temperature=0.0, max_tokens=400, ignore_eos=True, speculation="off")
    seen: list = []
    stream = slotted.chat(_ask(3), long, slot=ApiSlot("leaver"), ticket=7)
    for event in stream:
        seen.append(event)
        if sum(isinstance(e, TokenEvent) for e in seen) == 3:
            slotted.stop_slot(7)
        if isinstance(event, DoneEvent | ErrorEvent):
            break
    assert isinstance(seen[-1], DoneEvent) and seen[-1].stop_reason == "stopped"
    assert seen[-1].stats.decode_tokens < 10
    _, next_one = _turn(slotted, 4, ApiSlot("next"))
    assert isinstance(next_one, DoneEvent)


def test_a_client_that_leaves_mid_stream_frees_its_slot(slotted) -> None:
    long = SamplingSettings(temperature=0.0, max_tokens=400, ignore_eos=True, speculation="off")
    stream = slotted.chat(_ask(5), long, slot=ApiSlot("gone"))
    for event in stream:
        if isinstance(event, TokenEvent):
            break
    stream.close()  # what a dropped connection does: the engine is told to stop
    _, after = _turn(slotted, 6, ApiSlot("after"))
    assert isinstance(after, DoneEvent) and after.stats.decode_tokens == GREEDY.max_tokens


def test_a_prompt_longer_than_a_slot_is_refused_and_the_others_go_on(slotted) -> None:
    huge = [{"role": "user", "content": "word " * 700}]
    events = list(slotted.chat(huge, GREEDY, slot=ApiSlot("huge")))
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].kind is ErrorKind.PROMPT_TOO_LONG and "512" in events[-1].message
    _, fine = _turn(slotted, 0, ApiSlot("fine"))
    assert isinstance(fine, DoneEvent)


def test_images_are_refused_in_a_slot_with_the_reason(slotted) -> None:
    from vllmchat.core.engine.chat_options import ChatOptions

    events = list(
        slotted.chat(_ask(0), GREEDY, ChatOptions(images=(b"\x89PNG",)), slot=ApiSlot("eyes"))
    )
    assert isinstance(events[-1], ErrorEvent)  # without a projector, or in a slot: refused
    assert events[-1].kind in (ErrorKind.NO_VISION, ErrorKind.BAD_REQUEST)


def test_a_grammar_holds_per_sequence(slotted) -> None:
    from vllmchat.core.engine.chat_options import ChatOptions

    schema = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    sampling = SamplingSettings(temperature=0.0, max_tokens=40, speculation="off")
    texts: dict[int, str] = {}

    def run(i: int) -> None:
        options = ChatOptions(json_schema=schema) if i == 0 else ChatOptions()
        events = list(slotted.chat(_ask(i), sampling, options, slot=ApiSlot(f"g{i}")))
        texts[i] = events[-1].text if isinstance(events[-1], DoneEvent) else "failed"

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    import json

    assert isinstance(json.loads(texts[0])["n"], int)
    assert not texts[1].lstrip().startswith("{")


def test_the_window_turn_runs_while_clients_stream(slotted) -> None:
    results: list = []
    worker = threading.Thread(
        target=lambda: results.extend(_at_once(slotted, [ApiSlot(f"w{i}") for i in range(4)]))
    )
    worker.start()
    window = list(slotted.chat([{"role": "user", "content": "Hello there!"}], GREEDY))
    worker.join(300)
    assert isinstance(window[-1], DoneEvent) and window[-1].stats.decode_tokens == 24
    assert all(isinstance(last, DoneEvent) for _, last in results) and len(results) == 4
    again = list(slotted.chat([{"role": "user", "content": "Hello there!"}], GREEDY))
    assert again[-1].stats.tokens_reused > 5  # the window's own sequence was left alone


def test_a_window_task_starts_from_a_copy_of_its_cells_and_leaves_them_alone(slotted) -> None:
    from vllmchat.core.engine.events import StatsEvent
    from vllmchat.core.engine.side_turns import SideTurn

    chat = [{"role": "system", "content": "You are terse. " * 20}, *_ask(3)]
    window = list(slotted.chat(chat, GREEDY))
    held = slotted.kv().kv_tokens
    title_ask = [
        *chat,
        {"role": "assistant", "content": window[-1].text},
        {"role": "user", "content": "A title for this chat?"},
    ]
    kept_before = {s.key for s in slotted.call(ListStates()).states}
    side = SideTurn(slotted)
    assert side.in_slot
    events = list(side.chat(title_ask, GREEDY))
    stats = next(e.stats for e in events if isinstance(e, StatsEvent))
    assert stats.note == "state: window" and stats.tokens_reused >= held - 1
    assert isinstance(events[-1], DoneEvent) and events[-1].stats.decode_tokens == 24
    assert slotted.kv().kv_tokens == held, "the window's own cells are as they were"
    fresh = list(slotted.chat(title_ask, GREEDY, slot=ApiSlot(reuse=False), ticket=1))
    assert [e.text for e in fresh if isinstance(e, TokenEvent)] == [
        e.text for e in events if isinstance(e, TokenEvent)
    ], "the copy gives the reply a fresh prompt gives"
    kept = {s.key for s in slotted.call(ListStates()).states} - kept_before
    assert len(kept) == 1, "nothing is kept of the window's task, only the fresh turn's"
    stopping = SideTurn(slotted)
    long = SamplingSettings(temperature=0.0, max_tokens=400, ignore_eos=True, speculation="off")
    n = 0
    for event in stopping.chat(title_ask, long):
        n += isinstance(event, TokenEvent)
        if n == 3:
            stopping.stop()
        last = event
    assert isinstance(last, DoneEvent) and last.stop_reason == "stopped" and n < 20


def test_every_client_hears_of_a_killed_engine_and_the_next_requests_work(slotted) -> None:
    long = SamplingSettings(temperature=0.0, max_tokens=400, ignore_eos=True, speculation="off")
    started = threading.Event()
    out: list = [None] * 8

    def run(i: int) -> None:
        for event in slotted.chat(_ask(i), long, slot=ApiSlot(f"k{i}")):
            started.set()
            out[i] = event
        assert out[i] is not None

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    assert started.wait(120)
    slotted.kill()
    for t in threads:
        t.join(60)
    assert all(isinstance(e, ErrorEvent) and e.kind is ErrorKind.ENGINE_DIED for e in out)
    slotted.restart()
    _, after = _turn(slotted, 0, ApiSlot("after-kill"))
    assert isinstance(after, DoneEvent)


def test_a_reload_ends_the_streaming_clients_with_a_reason(slotted, demo_model) -> None:
    long = SamplingSettings(temperature=0.0, max_tokens=400, ignore_eos=True, speculation="off")
    started = threading.Event()
    out: list = []

    def run() -> None:
        for event in slotted.chat(_ask(1), long, slot=ApiSlot("reloaded")):
            started.set()
            if isinstance(event, DoneEvent | ErrorEvent):
                out.append(event)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(120)
    slotted.reload(LoadSettings(model_path=str(demo_model), n_ctx=512, api_slots=2))
    thread.join(60)
    assert isinstance(out[-1], ErrorEvent) and "reloaded" in out[-1].message
    _, after = _turn(slotted, 2, ApiSlot("after-reload"))
    assert isinstance(after, DoneEvent)


def test_a_clients_state_outlives_the_engine_on_disk(
    make_client, demo_model: Path, tmp_path
) -> None:
    settings = LoadSettings(model_path=str(demo_model), n_ctx=512, api_slots=2)
    first_engine = make_client()
    first_engine.load(settings)
    kept = first_engine.call(KeepStates(str(tmp_path), ram_budget=0, disk_cap=64 << 20))
    assert kept.states == ()
    _, first = _turn(first_engine, 1, ApiSlot("lasting"))
    shown = first_engine.call(SaveStates())
    assert [(s.key, s.where) for s in shown.states] == [("lasting", "disk")]
    first_engine.kill()  # no goodbye: what is on disk is all there is
    engine = make_client()
    engine.load(settings)
    found = engine.call(KeepStates(str(tmp_path), ram_budget=1 << 30, disk_cap=64 << 20))
    assert [s.key for s in found.states] == ["lasting"]
    _, back = _turn(engine, 1, ApiSlot("lasting"), reply=first.text)
    assert isinstance(back, DoneEvent) and "state: disk" in back.stats.note
    assert back.stats.tokens_reused >= first.stats.prompt_tokens - 1


def test_tokens_sent_while_the_next_step_runs_are_the_same_and_whole(
    demo_model: Path, monkeypatch
) -> None:
    """Where a step's tokens are sent after the next step is queued (the GPU's way,
    forced here on the CPU), every client gets the reply it gets otherwise, each token
    once and in order, and a stop still ends a turn within a step."""
    from vllmchat.core.engine.local.client import EngineClient

    settings = LoadSettings(model_path=str(demo_model), n_ctx=512, api_slots=8)
    replies: dict[str, list] = {}
    for overlap in ("0", "1"):
        monkeypatch.setenv("VLLMCHAT_SLOT_OVERLAP", overlap)
        client = EngineClient()  # its own process, started with the setting
        try:
            client.load(settings)
            together = _at_once(client, [ApiSlot(f"c{i}", reuse=False) for i in range(8)])
            replies[overlap] = [(ids, last.text) for ids, last in together]
            assert all(isinstance(last, DoneEvent) for _, last in together)
            if overlap == "1":
                long = SamplingSettings(temperature=0.0, max_tokens=400, ignore_eos=True)
                seen: list = []
                for event in client.chat(_ask(3), long, slot=ApiSlot("leaver"), ticket=9):
                    seen.append(event)
                    if sum(isinstance(e, TokenEvent) for e in seen) == 3:
                        client.stop_slot(9)
                streamed = "".join(e.text for e in seen if isinstance(e, TokenEvent))
                assert isinstance(seen[-1], DoneEvent) and seen[-1].stop_reason == "stopped"
                assert seen[-1].stats.decode_tokens < 10 and streamed == seen[-1].text
        finally:
            client.close()
    assert replies["1"] == replies["0"]
    assert all(len(ids) == GREEDY.max_tokens for ids, _ in replies["1"])
