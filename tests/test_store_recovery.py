"""A damaged conversation database on real SQLite files: moved aside (never written
to), what can be read copied into a fresh one, and the app starts and says so."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from vllmchat.core.conversations.recovery import damage, open_store
from vllmchat.core.conversations.store import ConversationStore

PAGE = 4096


def _filled(path: Path, conversations: int = 4, messages: int = 40) -> dict[int, list[str]]:
    store = ConversationStore(path)
    texts: dict[int, list[str]] = {}
    for c in range(conversations):
        conv = store.create(title=f"Chat {c}")
        texts[conv.id] = []
        for m in range(messages):
            text = f"conversation {c} message {m} " + "lorem ipsum " * 40
            store.add_message(conv.id, "user" if m % 2 == 0 else "assistant", text)
            texts[conv.id].append(text)
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return texts


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "garbage pages":
        for page in (6, 9, 14):
            data[page * PAGE : (page + 1) * PAGE] = os.urandom(PAGE)
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "destroyed header":
        data[:100] = os.urandom(100)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["garbage pages", "truncated", "destroyed header"])
def test_a_damaged_database_is_moved_aside_and_what_can_be_read_is_kept(tmp_path, how):
    path = tmp_path / "conversations.sqlite3"
    texts = _filled(path)
    _damage(path, how)
    before = _digest(path)
    assert damage(path)  # the check finds it
    assert _digest(path) == before  # and did not write to it
    store, recovery = open_store(path)
    try:
        assert recovery is not None and recovery.damaged_path.exists()
        assert recovery.damaged_path.name.startswith("conversations.sqlite3.damaged-")
        assert _digest(recovery.damaged_path) == before  # kept as it was
        assert str(recovery.damaged_path) in recovery.message()
        assert store.db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        recovered = [r[0] for r in store.db.execute("SELECT content FROM messages")]
        assert recovery.messages == len(recovered)
        every = {t for ts in texts.values() for t in ts}

        def known(text: str) -> bool:  # a message, or the readable start of one
            return text in every or any(t.startswith(text) for t in every)

        assert all(known(text) for text in recovered)  # nothing invented
        for conv in store.conversations():  # every branch opens
            assert all(known(m.content) for m in store.path(conv.id))
        if how == "destroyed header":
            assert recovery.messages == 0  # SQLite cannot read any of it
        else:
            assert 0 < recovery.messages < len(every)
            assert recovery.conversations >= 1
        conv = store.create(title="After")  # the fresh store works
        store.add_message(conv.id, "user", "still here")
    finally:
        store.close()
    reopened, again = open_store(path)
    reopened.close()
    assert again is None  # told once


def test_an_empty_file_and_a_stray_wal_start_without_loss(tmp_path):
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")
    store, recovery = open_store(empty)
    assert recovery is None and store.conversations() == []
    store.close()
    path = tmp_path / "c.sqlite3"
    texts = _filled(path, conversations=2, messages=6)
    Path(str(path) + "-wal").write_bytes(os.urandom(3 * PAGE))
    store, recovery = open_store(path)
    try:
        assert recovery is None
        assert sum(len(store.path(c.id)) for c in store.conversations()) == 12
        assert {m.content for c in store.conversations() for m in store.path(c.id)} == {
            t for ts in texts.values() for t in ts
        }
    finally:
        store.close()


def test_the_terminal_starts_on_a_damaged_database_and_says_so(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "conversations.sqlite3"
    _filled(path)
    _damage(path, "garbage pages")
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data)}
    proc = subprocess.run([sys.executable, "-m", "vllmchat", "conversations"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "The conversation database was damaged" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Chat " in proc.stdout  # the recovered conversations are listed
    again = subprocess.run([sys.executable, "-m", "vllmchat", "conversations"], env=env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "damaged" not in again.stderr
    assert sqlite3.connect(path).execute("PRAGMA quick_check").fetchone()[0] == "ok"


def test_the_window_starts_on_a_damaged_database_and_says_so(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "conversations.sqlite3"
    _filled(path)
    _damage(path, "destroyed header")
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-m", "vllmchat", "--exit-after-show"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "The conversation database was damaged" in proc.stderr and "Traceback" not in proc.stderr
    assert list(data.glob("conversations.sqlite3.damaged-*"))


def test_the_notice_is_shown_without_blocking_the_window(qtbot, tmp_path):
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.kv_cache import KVStateCache
    from vllmchat.ui.window.main_window import MainWindow

    store = ConversationStore(tmp_path / "c.sqlite3")
    window = MainWindow(store, AppSettings(), KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(window)
    window.show()
    window.show_notice("Conversations recovered", "Recovered 3 conversations.")
    assert window.notice.isVisible() and not window.notice.isModal()
    assert "Recovered 3 conversations." in window.statusBar().currentMessage()
    window.notice.close()
    window.close()
    store.close()


def _newer_store(tmp_path: Path) -> tuple[Path, Path]:
    """A data folder whose store says it was written by a newer vllmchat."""
    data = tmp_path / "data"
    data.mkdir()
    path = data / "conversations.sqlite3"
    _filled(path, conversations=1, messages=2)
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version=99")
    raw.close()
    return data, path


def test_a_store_from_a_newer_version_is_a_clear_message_and_left_alone(tmp_path):
    data, path = _newer_store(tmp_path)
    before = _digest(path)
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data)}
    proc = subprocess.run([sys.executable, "-m", "vllmchat", "conversations"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "newer than this vllmchat" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _digest(path) == before and not list(data.glob("*.damaged-*"))


def test_the_window_says_a_newer_store_cannot_be_opened(tmp_path):
    data, _ = _newer_store(tmp_path)
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-m", "vllmchat", "--exit-after-show"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "newer than this vllmchat" in proc.stderr
    assert "Traceback" not in proc.stderr
