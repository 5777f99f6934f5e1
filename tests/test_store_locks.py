"""Another process holding the conversation database's write lock (a real second
process in ``BEGIN IMMEDIATE``): waited out with a message, never judged damage."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllmchat.core.conversations.store.faults import (
    StoreBusy,
    StoreFree,
    StoreLocked,
    is_corrupt,
    is_locked,
    lock_wait_s,
)
from vllmchat.core.conversations.store.recovery import open_store
from vllmchat.core.conversations.store.schema import MIGRATIONS
from vllmchat.core.conversations.store.store import ConversationStore

HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
for sql in sys.argv[3:]:
    db.execute(sql)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


def _hold(path: Path, seconds: float, *sql: str) -> subprocess.Popen[str]:
    """A second process that holds the write lock for ``seconds`` (running ``sql`` in it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), str(seconds), *sql],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _store(path: Path, messages: int = 4) -> None:
    store = ConversationStore(path)
    conv = store.create(title="Kept")
    for i in range(messages):
        store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"message {i}")
    store.close()


def test_a_write_lock_held_for_3_s_is_waited_out_and_the_write_goes_on(tmp_path):
    path = tmp_path / "c.sqlite3"
    _store(path)
    heard: list[object] = []
    holder = _hold(path, 3)
    try:
        started = time.monotonic()
        store, recovery = open_store(path, on_lock=heard.append)  # reading needs no wait
        assert recovery is None and time.monotonic() - started < 2
        message = store.add_message(1, "user", "written after the lock")
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert 1.5 < waited < 15
    assert [type(e) for e in heard] == [StoreBusy, StoreFree]
    assert "another vllmchat" in heard[0].message and "waiting" in heard[0].message  # type: ignore[attr-defined]
    assert [m.content for m in store.path(1)][-1] == message.content
    store.close()


def test_a_lock_held_past_the_limit_is_a_clear_typed_error(tmp_path):
    path = tmp_path / "c.sqlite3"
    _store(path)
    store = ConversationStore(path, lock_wait_s=1.5)
    holder = _hold(path, 8)
    try:
        started = time.monotonic()
        with pytest.raises(StoreLocked, match=r"Another vllmchat .* is writing") as caught:
            store.add_message(1, "user", "never written")
        assert 1.4 < time.monotonic() - started < 6
        assert "gave up after 1.5 s" in str(caught.value) and str(path) in str(caught.value)
    finally:
        holder.kill()
        holder.wait()
    assert [m.content for m in store.path(1)] == [f"message {i}" for i in range(4)]
    store.add_message(1, "user", "after")  # the store goes on once the lock is gone
    store.close()


def test_the_terminal_chat_ends_with_one_line_when_the_lock_is_not_released(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    _store(path)
    holder = _hold(path, 20)
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(tmp_path), "VLLMCHAT_LOCK_WAIT_S": "2"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vllmchat", "chat"],
            env=env,
            input="Hello\n",  # the conversation is written at its first message
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait()
    # The chat starts (reading waits for no lock); its first message, which writes the
    # conversation, waits, says so once, and is refused in one line.
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (note,) = proc.stderr.strip().splitlines()
    assert note.startswith("note: another vllmchat") and "waiting up to 2 s" in note
    (error,) = [line for line in proc.stdout.splitlines() if line.startswith("error:")]
    assert error.startswith("error: The message was not sent: Another vllmchat")
    assert "gave up after 2 s" in error and "disk space" not in error
    assert not list(tmp_path.glob("*.damaged-*"))


def _previous_schema(path: Path) -> None:
    """A store as the previous vllmchat left it (one migration behind), with history."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    for number, script in enumerate(MIGRATIONS[:-1], 1):
        raw.executescript(f"BEGIN;{script}PRAGMA user_version={number};COMMIT;")
    raw.execute("INSERT INTO conversations(id, title, created, updated) VALUES (1,'Old',0,0)")
    for i in range(1, 5):
        raw.execute(
            "INSERT INTO messages(id, conversation_id, parent_id, role, content, created)"
            " VALUES (?,1,?,'user',?,0)",
            (i, i - 1 or None, f"old {i}"),
        )
    raw.execute("UPDATE conversations SET leaf_id=4")
    raw.close()


def test_a_previous_schema_opened_under_a_lock_is_waited_for_not_judged_damaged(tmp_path):
    path = tmp_path / "c.sqlite3"
    _previous_schema(path)
    heard: list[object] = []
    # The other process writes while it holds the lock: its message must land in the store.
    holder = _hold(
        path,
        3,
        "INSERT INTO messages(id, conversation_id, parent_id, role, "
        "content, created) VALUES (5, 1, 4, 'assistant', 'written meanwhile', 0)",
        "UPDATE conversations SET leaf_id=5",
    )
    try:
        store, recovery = open_store(path, on_lock=heard.append, lock_wait_s=20)
    finally:
        holder.wait(timeout=30)
    assert recovery is None and not list(tmp_path.glob("*.damaged-*"))
    assert [type(e) for e in heard] == [StoreBusy, StoreFree]
    assert store.version == len(MIGRATIONS)
    assert [m.content for m in store.path(1)] == [
        "old 1",
        "old 2",
        "old 3",
        "old 4",
        "written meanwhile",
    ]
    store.close()


def test_a_previous_schema_locked_past_the_limit_is_left_alone(tmp_path):
    path = tmp_path / "c.sqlite3"
    _previous_schema(path)
    holder = _hold(path, 6)
    try:
        with pytest.raises(StoreLocked):
            open_store(path, lock_wait_s=1.5)
        assert path.exists() and not list(tmp_path.glob("*.damaged-*"))  # not moved
    finally:
        holder.kill()  # the lock ends with its process
        holder.wait()
    store, recovery = open_store(path)  # after the lock ends: migrated, history intact
    assert recovery is None and store.version == len(MIGRATIONS)
    assert [m.content for m in store.path(1)] == ["old 1", "old 2", "old 3", "old 4"]
    store.close()


def test_two_stores_migrating_at_once_migrate_once(tmp_path):
    path = tmp_path / "c.sqlite3"
    _previous_schema(path)
    code = (
        "import sys;"
        "from vllmchat.core.conversations.store.store import ConversationStore as S;"
        "print(S(sys.argv[1]).version)"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [p.communicate(timeout=60) for p in procs]
    assert all(out.strip() == str(len(MIGRATIONS)) for out, _ in results), results
    assert all(p.returncode == 0 for p in procs)


def test_sqlite_error_codes_tell_a_lock_from_damage(tmp_path, monkeypatch):
    path = tmp_path / "c.sqlite3"
    _store(path)
    holder = _hold(path, 5)
    try:
        other = sqlite3.connect(path, timeout=0)
        with pytest.raises(sqlite3.OperationalError) as busy:
            other.execute("BEGIN IMMEDIATE")
        other.close()
    finally:
        holder.kill()
        holder.wait()
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all" * 200)
    with pytest.raises(sqlite3.DatabaseError) as notadb:
        sqlite3.connect(junk).execute("SELECT * FROM sqlite_master")
    assert is_locked(busy.value) and not is_corrupt(busy.value)
    assert is_corrupt(notadb.value) and not is_locked(notadb.value)
    # Python 3.10 has no error codes: the message text decides
    assert is_locked(sqlite3.OperationalError("database is locked"))
    assert is_corrupt(sqlite3.DatabaseError("database disk image is malformed"))
    assert not is_corrupt(sqlite3.OperationalError("disk I/O error"))
    monkeypatch.setenv("VLLMCHAT_LOCK_WAIT_S", "2.5")
    assert lock_wait_s() == 2.5
    monkeypatch.setenv("VLLMCHAT_LOCK_WAIT_S", "soon")
    assert lock_wait_s() == 30.0


def test_the_window_shows_a_lock_wait_in_its_status_bar_from_any_thread(qtbot, tmp_path):
    import threading

    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache
    from vllmchat.ui.window.app import lock_messages_in_status
    from vllmchat.ui.window.main_window import MainWindow

    store = ConversationStore(tmp_path / "c.sqlite3")
    window = MainWindow(store, AppSettings(), KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(window)
    window.show()
    store.on_lock = lock_messages_in_status(window)
    store.on_lock(StoreBusy(store.file, 30))  # the GUI thread's own write: shown at once
    assert "is writing to the conversation database" in window.statusBar().currentMessage()
    worker = threading.Thread(target=store.on_lock, args=(StoreFree(store.file, 3.0),))
    worker.start()  # a worker's write: shown through the event loop
    worker.join()
    qtbot.waitUntil(lambda: "free again" in window.statusBar().currentMessage())
    window.close()
    store.close()
