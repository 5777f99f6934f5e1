"""The application layer both front ends use: loads, turns, checkpoints, crashes, quitting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import EngineDied, Loaded, LoadFailed, SettingsChanged, TurnStarted
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import MessageStored
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, ErrorKind

QUESTION = (
    "I am planning a week of walking in the mountains in late spring and would like "
    "advice on what to pack, how to plan each day, what to do if the weather turns, "
    "and how to keep food light. Please keep the answer short."
)


@pytest.fixture
def app(make_demo_app):
    chat, loaded = make_demo_app(n_ctx=2048, max_tokens=24)
    assert loaded and loaded[0].hardware is not None and loaded[0].description is not None
    return chat


def _done(events) -> tuple[DoneEvent, list]:
    events = list(events)
    assert isinstance(events[-1], DoneEvent), events[-1]
    return events[-1], events


def test_a_turn_yields_its_stored_message_ids_and_checkpoints_the_kv_state(app, tmp_path):
    done, events = _done(app.send(QUESTION))
    assert isinstance(events[0], TurnStarted)
    stored = [e for e in events if isinstance(e, MessageStored)]
    path = app.store.path(app.conversation_id)
    assert [(e.role, e.message_id) for e in stored] == [(m.role, m.id) for m in path]
    deadline = time.monotonic() + 10  # written on the engine's own thread
    while not app.kv.files(app.conversation_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert app.kv.files(app.conversation_id) and done.stats.kv_tokens > 64


def test_a_crash_restarts_from_the_last_checkpoint(app):
    _done(app.send(QUESTION))
    _done(app.send("And what about water?"))
    history = [m.content for m in app.store.path(app.conversation_id)]
    app.engine.kill()
    deadline = time.monotonic() + 10
    died = None
    while died is None and time.monotonic() < deadline:
        died = app.watch()
        time.sleep(0.05)
    assert isinstance(died, EngineDied) and "SIGKILL" in died.reason
    assert app.watch() is None  # reported once
    loaded = [e for e in app.restart() if isinstance(e, Loaded)]
    assert loaded and loaded[0].restored_tokens > 64
    done, _ = _done(app.send("Thanks!"))
    # Only the new message is read again, not the whole chat.
    assert done.stats.tokens_reused >= loaded[0].restored_tokens - 1
    assert done.stats.tokens_prefilled == done.stats.tokens_new
    assert [m.content for m in app.store.path(app.conversation_id)][:4] == history


def test_a_bad_model_file_is_a_load_failed_event_and_the_model_stays(app, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    events = list(app.load(app.settings.with_changes(model_path=str(bad))))
    failed = events[-1]
    assert isinstance(failed, LoadFailed) and failed.kind == ErrorKind.NOT_GGUF and failed.fix
    assert app.settings.load.model_path != str(bad)


def test_sigterm_during_a_reply_keeps_it_and_saves_the_kv_state(tmp_path, demo_model):
    env = {
        **os.environ,
        "VLLMCHAT_DATA_DIR": str(tmp_path / "data"),
        "VLLMCHAT_KV_DIR": str(tmp_path / "kv"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllmchat",
            "chat",
            "--n-ctx",
            "2048",
            "--max-tokens",
            "2000",
            "--temperature",
            "0",
            "--threads",
            "2",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("Write a very long story about a lighthouse keeper and the sea.\n")
    proc.stdin.flush()
    seen = ""
    while "ai> " not in seen or len(seen.split("ai> ", 1)[1]) < 200:
        seen += proc.stdout.read(1)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    store = ConversationStore(tmp_path / "data" / "conversations.sqlite3")
    try:
        reply = store.path(store.conversations()[0].id)[-1]
        assert reply.role == "assistant" and reply.partial and len(reply.content) >= 200
    finally:
        store.close()
    assert list((tmp_path / "kv").glob("*/conversation-*.kv"))  # a folder per model


def test_load_settings_changed_with_no_model_loaded_are_written_only_once_a_load_takes_them(
    tmp_path, demo_model
):
    """With no model loaded, a change to the load settings is taken (the next load uses
    it) but not written: a start that then fails must not leave them on disk."""
    store = ConversationStore(tmp_path / "c.sqlite3")
    first = AppSettings.of(model_path=str(demo_model), n_threads=2, n_ctx=1024)
    written: list[AppSettings] = []
    app = ChatApp(store, KVStateCache(tmp_path / "kv"), first, persist=written.append)
    try:
        events = list(app.configure(n_ctx=2048, max_tokens=7))
        assert [type(e) for e in events] == [SettingsChanged]
        assert app.settings.load.n_ctx == 2048  # the next load uses it
        assert [(s.load.n_ctx, s.sampler.max_tokens) for s in written] == [(1024, 7)]
        assert list(app.start())[-1].__class__ is Loaded
        assert (written[-1].load.n_ctx, written[-1].sampler.max_tokens) == (2048, 7)
        assert app.engine.info is not None and app.engine.info.n_ctx == 2048
    finally:
        app.shutdown()
        store.close()
