"""A full disk, on a real small filesystem (tmpfs mounted by the test), and a store
that fails mid-turn: one clear message, nothing lost, the next try works."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import Loaded, StorageWarning
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path`` (the test needs the right to mount)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path) -> Path:
    """Fill the filesystem: what is left cannot hold a page."""
    filler = folder / "filler"
    with filler.open("wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    return filler


def _app(store: ConversationStore, kv: Path, demo_model: Path) -> ChatApp:
    app = ChatApp(store, KVStateCache(kv))
    app.open_conversation(store.create().id)
    settings = AppSettings.of(
        model_path=str(demo_model), n_ctx=1024, n_threads=2, temperature=0.0, max_tokens=24
    )
    assert any(isinstance(e, Loaded) for e in app.load(settings))
    return app


def test_a_kv_state_that_cannot_be_written_is_one_clear_message(tmp_path, demo_model, capfd):
    store = ConversationStore(tmp_path / "c.sqlite3")
    with small_filesystem(tmp_path / "kv", "256k") as kv:
        app = _app(store, kv, demo_model)
        try:
            warnings = []
            question = "Tell me about the sea, the sky and the mountains, in detail. " * 3
            for _ in range(3):
                events = list(app.send(question))
                assert any(isinstance(e, DoneEvent) for e in events)  # the turns go on
                warnings += [e for e in events if isinstance(e, StorageWarning)]
            assert len(warnings) == 1  # told once, not every turn
            assert "conversation is saved" in warnings[0].message
            assert "No space left on device" in warnings[0].message
            assert len(store.path(app.conversation_id)) == 6  # every message stored
        finally:
            app.shutdown()  # the last turn's state is written in the background until then
            store.close()
        left = [p.name for p in kv.rglob("*") if p.is_file() and p.name != "index.json"]
        assert left == []  # no partial files
    assert "Traceback" not in capfd.readouterr().err


def test_a_message_the_full_store_cannot_take_is_refused_then_sent(tmp_path, demo_model):
    with small_filesystem(tmp_path / "data", "2m") as data:
        store = ConversationStore(data / "c.sqlite3")
        app = _app(store, tmp_path / "kv", demo_model)
        try:
            filler = _fill(data)
            long = "Please remember this long note. " * 60
            events = list(app.send(long))
            failed = [e for e in events if isinstance(e, ErrorEvent)]
            assert failed and failed[-1].kind == ErrorKind.STORAGE
            assert "full" in failed[-1].message and "safe" in failed[-1].fix
            filler.unlink()  # space freed: the same message goes through
            assert any(isinstance(e, DoneEvent) for e in app.send(long))
            assert store.path(app.conversation_id)[-2].content == long
        finally:
            app.shutdown()
            store.close()


def test_the_reply_failing_to_store_ends_the_turn_and_keeps_the_question(
    qtbot, demo_window, monkeypatch
):
    window, store, _ = demo_window
    real = store.add_message

    def failing(conversation_id, role, content, **kwargs):
        if role == "assistant":
            raise sqlite3.OperationalError("database or disk is full")
        return real(conversation_id, role, content, **kwargs)

    monkeypatch.setattr(store, "add_message", failing)
    with qtbot.waitSignal(window.turn_ended, timeout=60000):
        window.input.edit.setPlainText("Hello there")
        window.input._submit()
    assert isinstance(window.last_turn, ErrorEvent) and window.input.send.isEnabled()
    assert "could not be stored" in window.statusBar().currentMessage()
    assert window.input.edit.toPlainText() == ""  # the question is stored, not returned
    assert [m.content for m in store.path(window.conversation_id)] == ["Hello there"]


def test_a_store_failure_mid_turn_ends_the_turn_and_the_window_recovers(
    qtbot, demo_window, monkeypatch
):
    window, store, _ = demo_window
    real = store.add_message
    calls = {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.OperationalError("database or disk is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "add_message", failing)
    with qtbot.waitSignal(window.turn_ended, timeout=60000):
        window.input.edit.setPlainText("Hello there")
        window.input._submit()
    assert window.input.send.isEnabled() and not window.input.stop.isEnabled()
    assert window.input.edit.toPlainText() == "Hello there"  # nothing typed is lost
    assert "database or disk is full" in window.statusBar().currentMessage()
    assert all(w.message_id is not None for w in window.chat.messages())
    with qtbot.waitSignal(window.turn_ended, timeout=60000):
        window.input._submit()  # the next try works
    assert isinstance(window.last_turn, DoneEvent)
    assert [m.content for m in store.path(window.conversation_id)][-2] == "Hello there"


def test_an_exception_in_any_job_ends_in_an_event_the_window_shows(qtbot, demo_window):
    window, _, _ = demo_window

    def broken() -> Iterator[object]:
        yield from ()
        raise RuntimeError("something unexpected")

    with qtbot.waitSignal(window.turn_ended, timeout=10000):
        window.bridge.call(broken)
    assert isinstance(window.last_turn, ErrorEvent)
    assert "something unexpected" in window.statusBar().currentMessage()
    assert window.input.send.isEnabled()
