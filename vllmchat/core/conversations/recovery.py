"""Opening the conversation database when it is damaged: move it aside, copy out
what can be read, start on a fresh one, and say what happened.

The check and the salvage read a copy of the file (and of its ``-wal``), so the
damaged file itself is never written to; it is renamed, never deleted.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.conversations.store import ConversationStore

SIDE_FILES = ("-wal", "-shm")
TABLES = ("conversations", "messages", "summaries")  # in the order rows refer to each other
JSON_DEFAULTS = {"settings": "{}", "stats": "{}", "token_ids": None}


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


def damage(path: Path) -> str:
    """Why the database at ``path`` cannot be used ("" when it can, or is absent)."""
    if not path.exists() or path.stat().st_size == 0:
        return ""  # nothing yet: SQLite starts a new database
    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy(path, Path(tmp))
        try:
            db = sqlite3.connect(copy)
            try:
                rows = db.execute("PRAGMA quick_check").fetchall()
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            return str(exc)
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    if not problems:
        return ""
    more = f" and {len(problems) - 1} more problems" if len(problems) > 1 else ""
    return problems[0] + more


def open_store(path: str | Path) -> tuple[ConversationStore, Recovery | None]:
    """The store at ``path``; a damaged one is moved aside and salvaged first."""
    path = Path(path)
    reason = damage(path)
    if not reason:
        try:
            return ConversationStore(path), None
        except sqlite3.DatabaseError as exc:  # damaged in a way the check did not read
            reason = str(exc)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    damaged = path.with_name(f"{path.name}.damaged-{stamp}")
    for side in ("", *SIDE_FILES):
        source = Path(str(path) + side)
        if source.exists():
            source.rename(Path(str(damaged) + side))
    store = ConversationStore(path)
    counts = _salvage(damaged, store)
    return store, Recovery(reason, damaged, *counts)


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
    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy(damaged, Path(tmp), pad=True)
        try:
            src = sqlite3.connect(copy)
            src.row_factory = sqlite3.Row
        except sqlite3.DatabaseError:
            return 0, 0, 0
        db = store.db
        try:
            db.execute("PRAGMA foreign_keys=OFF")
            db.execute("BEGIN IMMEDIATE")
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
            src.close()
    return counts["conversations"], counts["messages"], counts["summaries"]


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
    that exist, and each conversation's leaf on one of its messages."""
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


def open_default_store() -> tuple[ConversationStore, Recovery | None]:
    """The user's store in the data folder (recovered first when damaged)."""
    from vllmchat.core.paths import data_dir

    return open_store(data_dir() / "conversations.sqlite3")
