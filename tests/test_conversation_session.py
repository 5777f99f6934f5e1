"""Chat sessions on the real engine: budget, summaries, KV states across reopen, branches."""

from __future__ import annotations

import pytest

from tests.helpers import GREEDY
from vllmchat.core.conversations.events import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.memory.summarize import clean_summary
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.conversations.turns.session import ChatSession, SessionConfig
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, StatsEvent
from vllmchat.core.engine.process.inference.speculative import common_prefix
from vllmchat.core.settings import LoadSettings, SamplingSettings


@pytest.fixture
def store(tmp_path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def _turn(events):
    events = list(events)
    by_type = {}
    for e in events:
        by_type.setdefault(type(e), []).append(e)
    return events, by_type


def _session(
    make_client,
    model,
    store,
    *,
    n_ctx: int,
    policy: ContextPolicy,
    sampling: SamplingSettings,
    system: str = "",
) -> ChatSession:
    """A new conversation on a freshly loaded engine."""
    client = make_client()
    client.load(LoadSettings(model_path=str(model), n_ctx=n_ctx, n_threads=2))
    conv = store.create(system_prompt=system)
    return ChatSession(store, client, conv.id, SessionConfig(policy=policy, sampling=sampling))


def _third_turn(session: ChatSession, *, when_summarizing) -> list:
    """Two turns, then a third whose summary is interrupted by ``when_summarizing``."""
    for q in QUESTIONS[:2]:
        list(session.send(q))
    events = []
    for event in session.send(QUESTIONS[2]):
        events.append(event)
        if isinstance(event, SummaryEvent) and event.status == "started":
            when_summarizing()
    return events


QUESTIONS = [
    "Where do zebras live?",
    "What do they eat?",
    "How fast can they run?",
    "Do they sleep standing?",
    "How long do they live?",
    "Are they related to horses?",
]


REPLY_TOKENS = 24  # replies that fill the context in a dozen turns


def test_summary_triggers_at_the_threshold_and_the_prompt_stays_in_context(
    gemma_model, store, make_client
):
    client = make_client()
    client.load(LoadSettings(model_path=str(gemma_model), n_ctx=512, n_threads=2))
    conv = store.create(system_prompt="You are brief.")
    policy = ContextPolicy(threshold=0.5, keep_last_turns=1, summary_max_words=40)
    session = ChatSession(
        store,
        client,
        conv.id,
        SessionConfig(
            policy=policy, sampling=SamplingSettings(temperature=0.0, max_tokens=REPLY_TOKENS)
        ),
    )
    summaries, plans = [], []
    for q in QUESTIONS * 2:
        events, by = _turn(session.send(q))
        assert isinstance(events[-1], DoneEvent), events[-1]
        plans += by.get(PromptPlanEvent, [])
        summaries += [e for e in by.get(SummaryEvent, []) if e.status in ("done", "fallback")]
        done = events[-1]
        assert done.stats.prompt_tokens + done.stats.decode_tokens <= 512
    assert summaries, "the threshold was passed, so a summary was attempted"
    assert all(p.prompt_tokens <= 512 - REPLY_TOKENS for p in plans)
    made = [s for s in summaries if s.status == "done"]
    if made:  # the summary is stored, visible, and the originals are kept
        stored = store.summaries(conv.id)
        assert stored and stored[-1].content == made[-1].text
        assert made[-1].prefill_tokens > 0
    assert len(store.path(conv.id)) == 2 * len(QUESTIONS) * 2


def test_summary_longer_than_what_it_replaces_falls_back_to_keep_last(
    tiny_models, store, make_client
):
    """A summarizer (a loopback server told to ramble) whose "summary" of a few short
    words is longer than them."""
    from tests.fake_openai import FakeServer
    from vllmchat.core.engine.remote.engine import RemoteEngine

    session = _session(
        make_client,
        tiny_models["chatml"],
        store,
        n_ctx=2048,
        policy=ContextPolicy(every_k_turns=3, keep_last_turns=1),
        sampling=SamplingSettings(temperature=0.0, max_tokens=1),
    )
    conv = store.conversation(session.conversation_id)
    events = []
    with FakeServer() as server:
        server.mode = "script"
        server.script = ["Facts:\n- words: " + "hi ok yo " * 40 + "\n\nSummary: " + "yo " * 80] * 3
        session.configure(session.config.changed(summarizer=RemoteEngine(server.url)))
        for word in ("hi", "ok", "yo", "go", "so"):
            events += list(session.send(word))
    statuses = [e.status for e in events if isinstance(e, SummaryEvent)]
    assert "fallback" in statuses and "done" not in statuses
    fallback = next(e for e in events if isinstance(e, SummaryEvent) and e.status == "fallback")
    assert "longer than what it replaces" in fallback.message
    assert "Keeping the last" in fallback.message
    assert store.summaries(conv.id) == []
    assert isinstance(events[-1], DoneEvent)


def test_a_failed_summary_falls_back_and_the_conversation_survives(gemma_model, store, make_client):
    session = _session(
        make_client,
        gemma_model,
        store,
        n_ctx=2048,
        policy=ContextPolicy(every_k_turns=2, keep_last_turns=1),
        sampling=SamplingSettings(temperature=0.0, max_tokens=8),
    )
    client, conv = session.client, store.conversation(session.conversation_id)
    events = _third_turn(session, when_summarizing=client.kill)
    fallback = [e for e in events if isinstance(e, SummaryEvent) and e.status == "fallback"]
    assert fallback and "failed" in fallback[0].message
    assert isinstance(events[-1], ErrorEvent) and events[-1].kind == ErrorKind.ENGINE_DIED
    client.restart()
    session.prime()
    assert isinstance(list(session.send("Still there?"))[-1], DoneEvent)
    assert [m.content for m in store.path(conv.id) if m.role == "user"][-2:] == [
        QUESTIONS[2],
        "Still there?",
    ]


def test_summarizing_can_be_cancelled(gemma_model, store, make_client):
    session = _session(
        make_client,
        gemma_model,
        store,
        n_ctx=2048,
        policy=ContextPolicy(every_k_turns=2, keep_last_turns=1, summary_max_tokens=400),
        sampling=SamplingSettings(temperature=0.0, max_tokens=16),
    )
    _client, conv = session.client, store.conversation(session.conversation_id)
    events = _third_turn(session, when_summarizing=session.stop)
    statuses = [e.status for e in events if isinstance(e, SummaryEvent)]
    assert statuses == ["started", "cancelled"]
    assert not any(isinstance(e, DoneEvent) for e in events), "no reply after a cancel"
    assert store.summaries(conv.id) == []
    assert store.path(conv.id)[-1].content == QUESTIONS[2], "the message is kept"
    assert isinstance(list(session.regenerate())[-1], DoneEvent)


def test_empty_summaries_are_rejected():
    assert clean_summary("\n\n   \n", 50) == ""
    assert clean_summary("Summary: They met.\n\nUser: more", 50) == "They met."
    assert clean_summary("one two three four", 2) == "one two …"


def test_keep_last_policy_shows_what_is_left_out(gemma_model, store, make_client):
    session = _session(
        make_client,
        gemma_model,
        store,
        n_ctx=256,
        policy=ContextPolicy(mode="keep_last"),
        sampling=SamplingSettings(temperature=0.0, max_tokens=40, ignore_eos=True),
    )
    _client, conv = session.client, store.conversation(session.conversation_id)
    dropped = 0
    for q in QUESTIONS:
        events, by = _turn(session.send(q))
        assert isinstance(events[-1], DoneEvent)
        dropped = max(dropped, *(p.dropped_messages for p in by[PromptPlanEvent]))
    assert dropped > 0
    assert len(store.path(conv.id)) == 2 * len(QUESTIONS), "nothing is deleted"


def test_ask_policy_stops_and_says_so(gemma_model, store, make_client):
    session = _session(
        make_client,
        gemma_model,
        store,
        n_ctx=256,
        policy=ContextPolicy(mode="ask"),
        sampling=SamplingSettings(temperature=0.0, max_tokens=40, ignore_eos=True),
    )
    _client, _conv = session.client, store.conversation(session.conversation_id)
    last = None
    for q in QUESTIONS:
        last = list(session.send(q))[-1]
        if isinstance(last, ErrorEvent):
            break
    assert isinstance(last, ErrorEvent) and last.kind == ErrorKind.CONTEXT_FULL
    assert "summarize" in last.message


def test_kv_state_survives_closing_and_another_layout_keeps_its_own(
    gemma_model, store, make_client, tmp_path
):
    settings = LoadSettings(model_path=str(gemma_model), n_ctx=2048, n_threads=2)
    kv = KVStateCache(tmp_path / "kv")
    first = make_client()
    first.load(settings)
    conv = store.create()
    session = ChatSession(store, first, conv.id, SessionConfig(sampling=GREEDY))
    for q in QUESTIONS[:4]:
        list(session.send(q))
    saved = kv.save(first, conv.id)
    assert saved > 64
    first.close()

    second = make_client()
    second.load(settings)
    reopened = ChatSession(store, second, conv.id, SessionConfig(sampling=GREEDY))
    reopened.prime()
    assert kv.restore(second, conv.id) == saved
    events = list(reopened.send("Thanks!"))
    stats = next(e.stats for e in events if isinstance(e, StatsEvent))
    assert stats.tokens_reused == saved
    assert stats.tokens_prefilled == stats.tokens_new < 30

    assert kv.save(second, conv.id) > saved
    files = kv.files(conv.id)
    assert len(files) == 1
    other = make_client()
    other.load(settings.with_changes(type_k="q8_0", flash_attn=True))
    assert kv.restore(other, conv.id) == 0  # another KV layout: another folder, none there
    events = list(ChatSession(store, other, conv.id, SessionConfig(sampling=GREEDY)).send("Bye."))
    assert isinstance(events[-1], DoneEvent)
    assert kv.save(other, conv.id) > 0
    assert files[0].exists() and len(kv.files(conv.id)) == 2, "each layout keeps its own"
    kv.forget(other, conv.id)
    assert kv.files(conv.id) == [], "a deleted conversation's states all go"


def test_regenerate_and_edit_reuse_the_cache_up_to_the_change(tiny_models, store, make_client):
    client = make_client()
    client.load(LoadSettings(model_path=str(tiny_models["chatml"]), n_ctx=2048, n_threads=2))
    conv = store.create(system_prompt="sys")
    session = ChatSession(
        store, client, conv.id, SessionConfig(sampling=SamplingSettings(max_tokens=8))
    )
    for q in ("first question", "second question", "third question"):
        list(session.send(q))
    before = store.path(conv.id)
    prompt = session.plan(before[:-1])[0]
    events = list(session.regenerate())
    stats = next(e.stats for e in events if isinstance(e, StatsEvent))
    assert stats.tokens_reused == len(client.render(prompt)) - 1
    assert stats.tokens_prefilled == 1
    assert len(store.siblings(before[-1].id)) == 2, "the old reply is kept as a branch"

    old_prompt = client.render(session.plan(store.path(conv.id))[0])
    second_user = before[2]
    events = list(session.edit(second_user.id, "second question, rephrased"))
    stats = next(e.stats for e in events if isinstance(e, StatsEvent))
    new_prompt = client.render(session.plan(store.path(conv.id)[:-1])[0])
    assert stats.tokens_reused == common_prefix(old_prompt, new_prompt)
    assert 0 < stats.tokens_reused < len(old_prompt) - 20
    assert [m.content for m in store.path(conv.id)][-2] == "second question, rephrased"
    assert len(store.all_messages(conv.id)) == 9


def test_empty_and_huge_messages_get_clear_answers(gemma_client, store):
    conv = store.create()
    session = ChatSession(store, gemma_client, conv.id)
    err = list(session.send("   "))[-1]
    assert isinstance(err, ErrorEvent) and err.kind == ErrorKind.BAD_REQUEST
    huge = "word " * 210_000  # about 1 MB
    err = list(session.send(huge))[-1]
    assert isinstance(err, ErrorEvent) and err.kind == ErrorKind.PROMPT_TOO_LONG
    assert len(store.path(conv.id)[0].content) == len(huge), "the message itself is kept"
