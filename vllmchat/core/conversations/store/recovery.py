"""Opening the conversation database: a lock is waited out, damage is moved aside.

The start costs the same whatever the history's size: SQLite reads the header
(a file that is no database, or cut short, fails there) and the schema, and the
newest rows are read; ``quick_check`` runs on the whole file only while it is
small. Damage met later marks the file, and the next start checks it whole. A
damaged file is renamed to a name of its own, never deleted or written to, and
only once no other process has it open; what can be read is copied into a fresh
database. Only the salvage copies the file, to the temp folder, else beside the
database, else it reads the damaged file in place.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import quote

from vllmchat.core.conversations.store.aside import family, identity, move_aside
from vllmchat.core.conversations.store.faults import (
    NEEDS_CHECK,
    LockListener,
    LockWaits,
    StoreDamaged,
    StoreUnavailable,
    is_corrupt,
)
from vllmchat.core.conversations.store.store import ConversationStore

# in the order rows refer to each other; a table an older file lacks is skipped
TABLES = ("conversations", "messages", "summaries", "facts", "facts_taken")
JSON_DEFAULTS = {"settings": "{}", "stats": "{}", "token_ids": None}
WHOLE_CHECK_BYTES = 512 * 1024  # a store up to this size is checked whole at a start (~1 ms)
NEWEST = (  # what a start reads of a larger one: what the user is shown first
    "SELECT * FROM conversations ORDER BY id DESC LIMIT 20",
    "SELECT * FROM messages ORDER BY id DESC LIMIT 40",
    "SELECT * FROM summaries ORDER BY id DESC LIMIT 10",
)


@dataclass(frozen=True)
class Recovery:
    """What was found wrong, where the damaged file went, and what was copied out."""

    reason: str
    damaged_path: Path
    conversations: int
    messages: int
    summaries: int

    def message(self) -> str:
        counts = ", ".join(
            f"{n} {word if n == 1 else word + 's'}"
            for n, word in ((self.conversations, "conversation"), (self.messages, "message"))
        )
        summaries = f"{self.summaries} summar{'y' if self.summaries == 1 else 'ies'}"
        return (
            f"The conversation database was damaged ({self.reason}). Recovered {counts} and "
            f"{summaries} into a fresh database; the damaged file is kept at "
            f"{self.damaged_path}."
        )


def check(db: sqlite3.Connection, *, whole: bool = True) -> str:
    """What ``quick_check`` finds wrong ("" when nothing); ``whole=False`` reads only
    the header, the schema and the newest rows, at a cost that does not grow."""
    try:
        if not whole:
            for sql in NEWEST:
                db.execute(sql).fetchall()
            return ""
        rows = db.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            return str(exc)
        raise
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    if not problems:
        return ""
    more = f" and {len(problems) - 1} more problems" if len(problems) > 1 else ""
    return problems[0] + more


def damage(path: Path) -> str:
    """Why the database at ``path`` cannot be used ("" when it can, or is absent),
    from a whole check on a read-only connection (the file is not written to)."""
    if not path.exists() or path.stat().st_size == 0:
        return ""  # nothing yet: SQLite starts a new database
    try:
        with _read_only(path) as db:
            return check(db)
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            return str(exc)
        raise


def open_store(
    path: str | Path, *, on_lock: LockListener | None = None, lock_wait_s: float | None = None
) -> tuple[ConversationStore, Recovery | None]:
    """The store at ``path``; a damaged one is moved aside and salvaged first.

    Another process's write lock is waited out (``on_lock`` hears of it) for
    ``lock_wait_s``, then ``StoreLocked``; a damaged file another process has open
    is waited for likewise, never moved. Other failures are ``StoreUnavailable``.
    """
    path = Path(path)
    waits = LockWaits(path, limit_s=lock_wait_s, on_lock=on_lock)
    while True:
        checked = identity(path)
        store, reason = _open_checked(path, waits)
        if store is not None:
            return store, None
        damaged = waits.call(partial(move_aside, path, checked))
        if damaged is not None:
            break  # else another vllmchat replaced the file meanwhile: open that one
    store = ConversationStore(path, on_lock=on_lock, lock_wait_s=waits.limit_s)
    counts = _salvage(damaged, store)
    Path(str(path) + NEEDS_CHECK).unlink(missing_ok=True)
    return store, Recovery(reason, damaged, *counts)


def _open_checked(path: Path, waits: LockWaits) -> tuple[ConversationStore | None, str]:
    """The store when it passes the check, else None and what is wrong (it is closed)."""
    marker = Path(str(path) + NEEDS_CHECK)
    try:
        store = ConversationStore(path, on_lock=waits.on_lock, lock_wait_s=waits.limit_s)
    except StoreDamaged as exc:
        return None, str(exc.__cause__ or exc)
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(
            f"The conversation database {path} cannot be opened: {exc}."
        ) from exc
    # whole when small, or when damage was met in use
    whole = marker.exists() or path.stat().st_size <= WHOLE_CHECK_BYTES
    reason = store.waits.call(partial(check, store.db, whole=whole))
    if reason:
        store.close()
        return None, reason
    marker.unlink(missing_ok=True)
    return store, ""


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection; the side files it had to create are removed after."""
    existed = [p.exists() for p in family(path)]
    db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    try:
        yield db
    finally:
        db.close()
        for side, was in zip(family(path), existed, strict=True):
            if not was:
                with contextlib.suppress(OSError):
                    side.unlink()


def _copy(path: Path, folder: Path, *, pad: bool = False) -> Path:
    """A copy to read (with its WAL); ``pad``: a truncated file is filled with empty
    pages up to the size its header gives, so the pages that are left can be read."""
    copy = folder / path.name
    shutil.copyfile(path, copy)
    if pad:
        with copy.open("r+b") as fh:
            head = fh.read(100)
            if len(head) == 100 and head.startswith(b"SQLite format 3\x00"):
                page = int.from_bytes(head[16:18], "big")
                page = 65536 if page == 1 else page
                pages = int.from_bytes(head[28:32], "big")
                size = fh.seek(0, 2)
                if pages * page > size:
                    fh.truncate(pages * page)
    wal = Path(str(path) + "-wal")
    if wal.exists():
        shutil.copyfile(wal, Path(str(copy) + "-wal"))
    return copy


@contextlib.contextmanager
def _salvage_source(damaged: Path) -> Iterator[sqlite3.Connection]:
    """The damaged file to read from: a padded copy in the temp folder, else beside
    the database (a full temp folder), else the file itself, read-only."""
    for folder in (None, damaged.parent):
        try:
            scratch = tempfile.mkdtemp(prefix="vllmchat-salvage-", dir=folder)
        except OSError:
            continue
        try:
            try:
                copy = _copy(damaged, Path(scratch), pad=True)
            except OSError:
                continue  # no room there
            db = sqlite3.connect(copy)
            try:
                yield db
            finally:
                db.close()
            return
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    with _read_only(damaged) as db:
        yield db


def _rows(db: sqlite3.Connection, table: str) -> Iterator[sqlite3.Row]:
    """Every readable row of ``table`` in id order; unreadable stretches are skipped
    by probing the ids after them."""
    last, misses = 0, 0
    while misses < 2000:
        try:
            batch = db.execute(
                f"SELECT * FROM {table} WHERE id > ? ORDER BY id LIMIT 200", (last,)
            ).fetchall()
        except sqlite3.DatabaseError:
            batch = []
            try:
                row = db.execute(f"SELECT * FROM {table} WHERE id = ?", (last + 1,)).fetchone()
            except sqlite3.DatabaseError:
                row = None
            last += 1
            misses = 0 if row is not None else misses + 1
            if row is not None:
                yield row
            continue
        if not batch:
            return
        yield from batch
        last = batch[-1]["id"]


def _salvage(damaged: Path, store: ConversationStore) -> tuple[int, int, int]:
    """Copy every readable conversation, message and summary into ``store``."""
    counts = {t: 0 for t in TABLES}
    try:
        with _salvage_source(damaged) as src:
            src.row_factory = sqlite3.Row
            _copy_rows(src, store, counts)
    except sqlite3.DatabaseError:
        pass  # nothing more can be read
    return counts["conversations"], counts["messages"], counts["summaries"]


def _copy_rows(src: sqlite3.Connection, store: ConversationStore, counts: dict[str, int]) -> None:
    db = store.db
    try:
        db.execute("PRAGMA foreign_keys=OFF")
        store.waits.call(lambda: db.execute("BEGIN IMMEDIATE"))
        for table in TABLES:
            known = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            try:
                for row in _rows(src, table):
                    values = _clean(dict(zip(row.keys(), row, strict=True)))
                    # the columns both have (an older file lacks newer ones)
                    columns = [c for c in values if c in known]
                    marks = ",".join("?" * len(columns))
                    db.execute(
                        f"INSERT OR IGNORE INTO {table}({','.join(columns)}) VALUES ({marks})",
                        [values[c] for c in columns],
                    )
                    counts[table] += 1
            except sqlite3.DatabaseError:
                continue  # the table itself cannot be read
        _repair(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.execute("PRAGMA foreign_keys=ON")


def _clean(values: dict[str, object]) -> dict[str, object]:
    """A row as it can be kept: text cut off by a damaged page (it ends in NUL bytes)
    keeps its readable part, and a message so cut is marked partial."""
    cut = False
    for key, value in values.items():
        if isinstance(value, str) and "\x00" in value:
            values[key] = value.split("\x00", 1)[0]
            cut = True
            if key in JSON_DEFAULTS:  # half a JSON value is none
                values[key] = JSON_DEFAULTS[key]
    if cut and "partial" in values:
        values["partial"] = 1
    return values


def _repair(db: sqlite3.Connection) -> None:
    """Make the copied rows consistent: a conversation for every message, parents
    that exist, each conversation's leaf on one of its messages, and summaries and
    facts only of what is there."""
    now = time.time()
    db.execute(
        "INSERT INTO conversations(id, title, created, updated) "
        "SELECT DISTINCT conversation_id, 'Recovered conversation', ?, ? FROM messages "
        "WHERE conversation_id NOT IN (SELECT id FROM conversations)",
        (now, now),
    )
    db.execute(
        "UPDATE messages SET parent_id = NULL WHERE parent_id IS NOT NULL "
        "AND parent_id NOT IN (SELECT id FROM messages)"
    )
    db.execute(
        "UPDATE conversations SET leaf_id = (SELECT max(id) FROM messages m "
        "WHERE m.conversation_id = conversations.id) "
        "WHERE leaf_id IS NULL OR leaf_id NOT IN (SELECT id FROM messages)"
    )
    db.execute("DELETE FROM summaries WHERE conversation_id NOT IN (SELECT id FROM conversations)")
    db.execute(
        "DELETE FROM facts WHERE conversation_id NOT IN (SELECT id FROM conversations) "
        "OR (message_id IS NOT NULL AND message_id NOT IN (SELECT id FROM messages))"
    )
    db.execute("DELETE FROM facts_taken WHERE id NOT IN (SELECT id FROM messages)")


def open_default_store(
    *, on_lock: LockListener | None = None, lock_wait_s: float | None = None
) -> tuple[ConversationStore, Recovery | None]:
    """The user's store in the data folder (recovered first when damaged)."""
    from vllmchat.core.paths import data_dir

    return open_store(
        data_dir() / "conversations.sqlite3", on_lock=on_lock, lock_wait_s=lock_wait_s
    )
