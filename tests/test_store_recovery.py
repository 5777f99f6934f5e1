"""A damaged conversation database on real SQLite files: moved aside (never written
to, never while another process has it open, never onto an earlier copy), what can
be read copied into a fresh one, and the app starts and says so; a full temp
folder stops neither the start nor a recovery."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from vllmchat.core.conversations.store import aside
from vllmchat.core.conversations.store.faults import (
    NEEDS_CHECK,
    StoreBusy,
    StoreDamaged,
    StoreLocked,
)
from vllmchat.core.conversations.store.recovery import (
    WHOLE_CHECK_BYTES,
    Recovery,
    damage,
    open_store,
)
from vllmchat.core.conversations.store.store import ConversationStore

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
        pages = len(data) // PAGE  # three pages among the messages, past the schema's
        for page in (pages // 3, pages // 2, 2 * pages // 3):
            data[page * PAGE : (page + 1) * PAGE] = os.urandom(PAGE)
    elif how == "truncated":  # two thirds: past the schema's pages (30 at version 7)
        data = data[: 2 * len(data) // 3]
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
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "conversations"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "The conversation database was damaged" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Chat " in proc.stdout  # the recovered conversations are listed
    again = subprocess.run(
        [sys.executable, "-m", "vllmchat", "conversations"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "damaged" not in again.stderr
    assert sqlite3.connect(path).execute("PRAGMA quick_check").fetchone()[0] == "ok"


def test_the_window_starts_on_a_damaged_database_and_says_so(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "conversations.sqlite3"
    _filled(path)
    _damage(path, "destroyed header")
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "--exit-after-show"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "The conversation database was damaged" in proc.stderr and "Traceback" not in proc.stderr
    assert list(data.glob("conversations.sqlite3.damaged-*"))


def test_the_notice_is_shown_without_blocking_the_window(qtbot, tmp_path):
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache
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
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "conversations"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "newer than this vllmchat" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _digest(path) == before and not list(data.glob("*.damaged-*"))


def test_the_window_says_a_newer_store_cannot_be_opened(tmp_path):
    data, _ = _newer_store(tmp_path)
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "--exit-after-show"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "newer than this vllmchat" in proc.stderr
    assert "Traceback" not in proc.stderr


def _recover(path: Path) -> Recovery:
    store, recovery = open_store(path)
    store.close()
    assert recovery is not None
    return recovery


def test_two_recoveries_within_one_second_keep_two_damaged_copies(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    _filled(path, conversations=1, messages=4)
    _damage(path, "destroyed header")
    first_bytes = _digest(path)
    started = time.monotonic()
    first = _recover(path)
    _filled(path, conversations=1, messages=2)  # the fresh store, damaged again at once
    _damage(path, "destroyed header")
    second_bytes = _digest(path)
    second = _recover(path)
    assert time.monotonic() - started < 5  # well within a second on an idle machine
    assert first.damaged_path != second.damaged_path
    assert _digest(first.damaged_path) == first_bytes  # nothing overwritten
    assert _digest(second.damaged_path) == second_bytes
    assert len(list(tmp_path.glob("conversations.sqlite3.damaged-*"))) == 2


def test_a_damaged_copy_is_never_overwritten_even_with_the_same_stamp(tmp_path, monkeypatch):
    monkeypatch.setattr(aside.time, "time", lambda: 1_700_000_000.25)  # a frozen clock
    path = tmp_path / "conversations.sqlite3"
    taken = aside.unique_name(path)
    assert (
        taken.name
        == "conversations.sqlite3.damaged-"
        + time.strftime("%Y%m%d-%H%M%S", time.localtime(1_700_000_000))
        + ".250000"
    )
    taken.write_bytes(b"an earlier damaged copy")
    Path(str(taken) + "-2-wal").write_bytes(b"a stray side file")  # blocks -2 as well
    for _ in range(2):
        _filled(path, conversations=1, messages=2)
        _damage(path, "destroyed header")
        _recover(path)
    assert taken.read_bytes() == b"an earlier damaged copy"
    names = sorted(p.name for p in tmp_path.glob("conversations.sqlite3.damaged-*"))
    assert [n[len(taken.name) :] for n in names] == ["", "-2-wal", "-3", "-4"]


def _no_temp_space(monkeypatch, *, beside_too: bool = False) -> None:
    """The temp folder is full (and, with ``beside_too``, the data folder as well)."""
    real_mkdtemp, real_copyfile = tempfile.mkdtemp, shutil.copyfile

    def full(*args: object, **kwargs: object) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    def mkdtemp(suffix=None, prefix=None, dir=None):
        if dir is None or beside_too:
            return full()
        return real_mkdtemp(suffix, prefix, dir)

    monkeypatch.setattr(tempfile, "mkstemp", full)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(shutil, "copyfile", full if beside_too else real_copyfile)


def test_a_full_temp_folder_does_not_stop_the_start(tmp_path, monkeypatch):
    path = tmp_path / "conversations.sqlite3"
    texts = _filled(path, conversations=2, messages=6)
    _no_temp_space(monkeypatch, beside_too=True)
    store, recovery = open_store(path)  # a healthy store: nothing is copied anywhere
    assert recovery is None and len(store.path(1)) == len(texts[1])
    store.close()


@pytest.mark.parametrize("beside_too", [False, True], ids=["data folder", "in place"])
def test_a_full_temp_folder_does_not_stop_a_recovery(tmp_path, monkeypatch, beside_too):
    path = tmp_path / "conversations.sqlite3"
    _filled(path)
    _damage(path, "garbage pages")
    before = _digest(path)
    _no_temp_space(monkeypatch, beside_too=beside_too)
    store, recovery = open_store(path)
    try:
        assert recovery is not None and recovery.messages > 0  # read beside, or in place
        assert _digest(recovery.damaged_path) == before
        assert store.db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        store.close()
    leftovers = {p.name for p in tmp_path.iterdir()} - {path.name, recovery.damaged_path.name}
    assert not {n for n in leftovers if n.startswith(recovery.damaged_path.name)}  # no -wal/-shm
    assert not [n for n in leftovers if "salvage" in n]


def test_the_terminal_starts_when_no_file_can_grow(tmp_path):
    """A real full disk for the temp folder: every file this process writes stops at
    64 KiB (RLIMIT_FSIZE), and the store is larger than that."""
    resource = pytest.importorskip("resource")
    data = tmp_path / "data"
    data.mkdir()
    _filled(data / "conversations.sqlite3", conversations=6, messages=40)
    assert (data / "conversations.sqlite3").stat().st_size > 64 * 1024

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "conversations"],
        env=env,
        preexec_fn=small_files,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("40 messages") == 6 and "Traceback" not in proc.stderr


def test_a_full_temp_folder_on_a_real_filesystem(tmp_path):
    """TMPDIR on a filled tmpfs of 256 KiB: the start, and a recovery, go on."""
    from tests.test_disk_full import _fill, small_filesystem

    data = tmp_path / "data"
    data.mkdir()
    path = data / "conversations.sqlite3"
    _filled(path, conversations=8, messages=40)
    assert path.stat().st_size > 256 * 1024
    with small_filesystem(tmp_path / "tmp", "256k") as tmp:
        _fill(tmp)
        env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data), "TMPDIR": str(tmp)}
        command = [sys.executable, "-m", "vllmchat", "conversations"]
        healthy = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        _damage(path, "garbage pages")
        damaged = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert healthy.returncode == 0 and healthy.stdout.count("40 messages") == 8, healthy.stderr
    assert damaged.returncode == 0, damaged.stderr
    assert "The conversation database was damaged" in damaged.stderr
    assert "Traceback" not in damaged.stderr and "Chat " in damaged.stdout
    assert not [p for p in data.iterdir() if "salvage" in p.name]  # the copy beside is gone


HOLD_OPEN = """
import sqlite3, sys, time
if sys.argv[2] == "sqlite":
    db = sqlite3.connect(sys.argv[1])
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError:
        pass
else:
    f = open(sys.argv[1], "rb")  # a backup tool reading it
print("open", flush=True)
time.sleep(float(sys.argv[3]))
"""


@pytest.mark.parametrize("how", ["sqlite", "plain read"])
def test_a_damaged_file_another_process_has_open_is_never_moved(tmp_path, how):
    path = tmp_path / "conversations.sqlite3"
    _filled(path)
    _damage(path, "garbage pages")
    before = _digest(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OPEN, str(path), how.split()[0], "60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        heard: list[object] = []
        with pytest.raises(StoreLocked, match="damaged conversation database is") as caught:
            open_store(path, on_lock=heard.append, lock_wait_s=1.5)
        assert f"process {holder.pid}" in str(caught.value) or "locked by" in str(caught.value)
        assert [type(e) for e in heard] == [StoreBusy]
        assert _digest(path) == before and not list(tmp_path.glob("*.damaged-*"))
    finally:
        holder.kill()
        holder.wait()
    recovery = _recover(path)  # once it has closed it
    assert _digest(recovery.damaged_path) == before


def test_damage_past_the_start_check_is_met_in_use_and_recovered_at_the_next_start(tmp_path):
    from vllmchat.bench.conversations.store_bench import build_store

    path = tmp_path / "conversations.sqlite3"
    build_store(path, 3 * 2**20)
    assert path.stat().st_size > WHOLE_CHECK_BYTES  # the start reads only the newest rows
    raw = sqlite3.connect(path)
    sql = "SELECT pageno FROM dbstat WHERE name='messages' AND pagetype='leaf' ORDER BY path"
    leaves = [r[0] for r in raw.execute(sql)]
    raw.close()
    data = bytearray(path.read_bytes())
    for page in leaves[len(leaves) // 3 : len(leaves) // 3 + 3]:  # old messages, mid-file
        data[(page - 1) * PAGE : page * PAGE] = os.urandom(PAGE)
    path.write_bytes(bytes(data))
    store, recovery = open_store(path)
    assert recovery is None  # the start did not read that far
    with pytest.raises(StoreDamaged, match="Start vllmchat again"):
        for conv in store.conversations():
            store.all_messages(conv.id)
    store.close()
    assert Path(str(path) + NEEDS_CHECK).exists()
    recovery = _recover(path)  # the next start checks it whole
    assert recovery.messages > 0 and not Path(str(path) + NEEDS_CHECK).exists()
    store, again = open_store(path)
    store.close()
    assert again is None


def test_facts_are_recovered_with_their_conversations(tmp_path):
    from vllmchat.core.conversations.memory.fact_list import FactList

    path = tmp_path / "conversations.sqlite3"
    _filled(path, conversations=2, messages=20)
    store = ConversationStore(path)
    facts = FactList(store)
    facts.add(1, "The user's cat is called Miso.")
    facts.add(2, "The user lives by the sea.")
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    raw = sqlite3.connect(path)
    sql = "SELECT pageno FROM dbstat WHERE name='messages' AND pagetype='leaf' ORDER BY path"
    leaves = [r[0] for r in raw.execute(sql)]
    raw.close()
    data = bytearray(path.read_bytes())
    page = leaves[len(leaves) // 2]  # one page of messages, the facts' pages intact
    data[(page - 1) * PAGE : page * PAGE] = os.urandom(PAGE)
    path.write_bytes(bytes(data))
    store, recovery = open_store(path)
    try:
        assert recovery is not None and 0 < recovery.messages < 40
        texts = [f.text for c in (1, 2) for f in FactList(store).stored(c)]
        assert texts == ["The user's cat is called Miso.", "The user lives by the sea."]
    finally:
        store.close()
