"""A durable conversation store on SQLite (WAL): messages in a tree, summaries, search."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vllmchat.core.conversations.store.faults import (
    QUIET_MS,
    LockListener,
    LockWaits,
    StoreError,
    is_corrupt,
)
from vllmchat.core.conversations.store.records import (
    ROOT,
    Conversation,
    Message,
    Summary,
    message_from_row,
    summary_from_row,
    title_from,
)
from vllmchat.core.conversations.store.schema import migrate

__all__ = [
    "ROOT",
    "Conversation",
    "ConversationStore",
    "Message",
    "StoreError",
    "Summary",
    "title_from",
]


class ConversationStore:
    """All conversations of a user. Safe to use from several threads."""

    def __init__(
        self,
        path: str | Path,
        *,
        on_lock: LockListener | None = None,
        lock_wait_s: float | None = None,
    ) -> None:
        """Open (or create) the store; another process's write lock is waited out for
        ``lock_wait_s`` (default 30 s) and each wait told to ``on_lock``."""
        self.file = Path(path)
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.waits = LockWaits(self.file, limit_s=lock_wait_s, on_lock=on_lock)
        self.db = sqlite3.connect(
            self.file, check_same_thread=False, isolation_level=None, timeout=QUIET_MS / 1000
        )
        try:
            self.db.row_factory = sqlite3.Row
            self.db.execute(f"PRAGMA busy_timeout={QUIET_MS}")
            self.waits.call(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.version = self.waits.call(lambda: migrate(self.db))
        except BaseException:
            self.db.close()  # a file this process holds open is never moved aside
            raise

    @property
    def on_lock(self) -> LockListener | None:
        """Hears when a wait for another process's lock starts and ends."""
        return self.waits.on_lock

    @on_lock.setter
    def on_lock(self, listener: LockListener | None) -> None:
        self.waits.on_lock = listener

    def close(self) -> None:
        with self._lock:
            self.db.close()
            self.closed = True

    closed = False  # after close(): readers that come late (a queued event) read nothing

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """The rows of a query (waiting out a lock; damage is ``StoreDamaged``)."""
        return self.waits.call(lambda: self.db.execute(sql, args).fetchall())

    def _row(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction, begun once no other process holds the write lock (a wait
        is told to ``on_lock``); every write to the database goes through one."""
        with self._lock:
            self.waits.call(lambda: self.db.execute("BEGIN IMMEDIATE"))
            try:
                yield
                self.db.execute("COMMIT")
            except BaseException as exc:
                if self.db.in_transaction:  # SQLite may have rolled back itself (disk full)
                    self.db.execute("ROLLBACK")
                if is_corrupt(exc):
                    raise self.waits.damaged(exc) from exc
                raise

    def _write(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self.transaction():
            return self.db.execute(sql, args)

    # -- conversations ---------------------------------------------------------
    def create(self, *, title: str = "", system_prompt: str = "") -> Conversation:
        now = time.time()
        cur = self._write(
            "INSERT INTO conversations(title, system_prompt, created, updated) VALUES (?,?,?,?)",
            (title, system_prompt, now, now),
        )
        return self.conversation(_rowid(cur))

    def conversation(self, conversation_id: int) -> Conversation:
        row = self._row("SELECT * FROM conversations WHERE id=?", (conversation_id,))
        if row is None:
            raise StoreError(f"There is no conversation {conversation_id}.")
        return Conversation(
            row["id"],
            row["title"],
            row["system_prompt"],
            row["created"],
            row["updated"],
            row["leaf_id"],
        )

    def conversations(self) -> list[Conversation]:
        rows = self._rows("SELECT * FROM conversations ORDER BY updated DESC")
        return [
            Conversation(
                r["id"], r["title"], r["system_prompt"], r["created"], r["updated"], r["leaf_id"]
            )
            for r in rows
        ]

    def rename(self, conversation_id: int, title: str) -> None:
        self.conversation(conversation_id)
        self._write("UPDATE conversations SET title=? WHERE id=?", (title.strip(), conversation_id))

    def set_system_prompt(self, conversation_id: int, text: str) -> None:
        self._write("UPDATE conversations SET system_prompt=? WHERE id=?", (text, conversation_id))

    def delete(self, conversation_id: int) -> None:
        self.conversation(conversation_id)
        self._write("DELETE FROM conversations WHERE id=?", (conversation_id,))

    def set_leaf(self, conversation_id: int, message_id: int | None) -> None:
        self._write(
            "UPDATE conversations SET leaf_id=?, updated=? WHERE id=?",
            (message_id, time.time(), conversation_id),
        )

    # -- messages --------------------------------------------------------------
    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        parent_id: int | None = None,
        tokens: int = 0,
        token_ids: tuple[int, ...] | list[int] = (),
        model: str = "",
        settings: dict[str, Any] | None = None,
        stats: dict[str, Any] | None = None,
        partial: bool = False,
        make_leaf: bool = True,
    ) -> Message:
        """Append a message (committed at once) and make it the branch's tip."""
        conv = self.conversation(conversation_id)
        if parent_id is None and make_leaf:
            parent_id = conv.leaf_id
        if parent_id == ROOT:
            parent_id = None
        now = time.time()
        with self.transaction():
            cur = self.db.execute(
                "INSERT INTO messages(conversation_id, parent_id, role, content, created,"
                " tokens, token_ids, model, settings, stats, partial)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    conversation_id,
                    parent_id,
                    role,
                    content,
                    now,
                    tokens,
                    json.dumps(list(token_ids)) if token_ids else None,
                    model,
                    json.dumps(settings or {}),
                    json.dumps(stats or {}),
                    int(partial),
                ),
            )
            mid = _rowid(cur)
            sets = "updated=?" + (", leaf_id=?" if make_leaf else "")
            args: tuple[Any, ...] = (now, mid) if make_leaf else (now,)
            if not conv.title and role == "user":
                sets += ", title=?"
                args += (title_from(content),)
            self.db.execute(f"UPDATE conversations SET {sets} WHERE id=?", (*args, conversation_id))
        return self.message(mid)

    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        partial: bool | None = None,
        tokens: int | None = None,
        token_ids: list[int] | tuple[int, ...] | None = None,
        stats: dict[str, Any] | None = None,
        thinking: str | None = None,
    ) -> None:
        """Change a message in place (a streaming reply, an edited summary's source)."""
        sets, args = [], []
        for column, value in (
            ("content", content),
            ("thinking", thinking),
            ("tokens", tokens),
            ("partial", None if partial is None else int(partial)),
            ("token_ids", None if token_ids is None else json.dumps(list(token_ids))),
            ("stats", None if stats is None else json.dumps(stats)),
        ):
            if value is not None:
                sets.append(f"{column}=?")
                args.append(value)
        if sets:
            self._write(f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*args, message_id))

    def set_pinned(self, message_id: int, pinned: bool) -> Message:
        """Pin a message (verbatim in every prompt, never summarized) or unpin it."""
        self.message(message_id)  # a clear error for an unknown id
        self._write("UPDATE messages SET pinned=? WHERE id=?", (int(pinned), message_id))
        return self.message(message_id)

    def message(self, message_id: int) -> Message:
        row = self._row("SELECT * FROM messages WHERE id=?", (message_id,))
        if row is None:
            raise StoreError(f"There is no message {message_id}.")
        return message_from_row(row)

    def path(self, conversation_id: int, leaf_id: int | None = None) -> list[Message]:
        """The messages of one branch, oldest first (default: the current branch)."""
        if leaf_id is None:
            leaf_id = self.conversation(conversation_id).leaf_id
        if leaf_id is None:
            return []
        return [message_from_row(r) for r in self._branch(leaf_id, "m.*")]

    def _branch(self, leaf_id: int, columns: str) -> list[sqlite3.Row]:
        """``columns`` of the messages from the root to ``leaf_id``, oldest first."""
        return self._rows(
            "WITH RECURSIVE chain(id) AS (SELECT ? UNION ALL "
            "SELECT m.parent_id FROM messages m JOIN chain c ON m.id=c.id "
            "WHERE m.parent_id IS NOT NULL) "
            f"SELECT {columns} FROM messages m JOIN chain c ON m.id=c.id ORDER BY m.id",
            (leaf_id,),
        )

    def path_to_show(self, conversation_id: int) -> list[Message]:
        """The current branch as a view shows it: texts, roles, flags (no token ids,
        settings or stats, which a long conversation would parse for nothing)."""
        leaf_id = self.conversation(conversation_id).leaf_id
        if leaf_id is None:
            return []
        rows = self._branch(
            leaf_id,
            "m.id, m.conversation_id, m.parent_id, m.role, m.content, m.created, m.partial, "
            "m.pinned, m.thinking, json_extract(m.stats, '$.thinking_s') AS thinking_s",
        )
        return [
            Message(
                r["id"],
                r["conversation_id"],
                r["parent_id"],
                r["role"],
                r["content"],
                r["created"],
                partial=bool(r["partial"]),
                pinned=bool(r["pinned"]),
                thinking=r["thinking"],
                stats={} if r["thinking_s"] is None else {"thinking_s": r["thinking_s"]},
            )
            for r in rows
        ]

    def siblings(self, message_id: int) -> list[Message]:
        """Alternatives of a message: the branches that start at its parent."""
        m = self.message(message_id)
        rows = self._rows(
            "SELECT * FROM messages WHERE conversation_id=? AND parent_id IS ? ORDER BY id",
            (m.conversation_id, m.parent_id),
        )
        return [message_from_row(r) for r in rows]

    def all_messages(self, conversation_id: int) -> list[Message]:
        rows = self._rows(
            "SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,)
        )
        return [message_from_row(r) for r in rows]

    # -- summaries ---------------------------------------------------------------
    def add_summary(
        self,
        conversation_id: int,
        content: str,
        first_message_id: int,
        last_message_id: int,
        *,
        tokens: int = 0,
    ) -> Summary:
        cur = self._write(
            "INSERT INTO summaries(conversation_id, content, first_message_id, last_message_id,"
            " created, tokens) VALUES (?,?,?,?,?,?)",
            (conversation_id, content, first_message_id, last_message_id, time.time(), tokens),
        )
        return self.summary(_rowid(cur))

    def edit_summary(self, summary_id: int, content: str) -> None:
        self._write("UPDATE summaries SET content=?, edited=1 WHERE id=?", (content, summary_id))

    def summary(self, summary_id: int) -> Summary:
        row = self._row("SELECT * FROM summaries WHERE id=?", (summary_id,))
        if row is None:
            raise StoreError(f"There is no summary {summary_id}.")
        return summary_from_row(row)

    def summaries(self, conversation_id: int) -> list[Summary]:
        rows = self._rows(
            "SELECT * FROM summaries WHERE conversation_id=? ORDER BY id", (conversation_id,)
        )
        return [summary_from_row(r) for r in rows]

    def summary_for(self, conversation_id: int, path: list[Message]) -> Summary | None:
        """The newest summary that covers a prefix of this branch."""
        ids = {m.id for m in path}
        for s in reversed(self.summaries(conversation_id)):
            if s.last_message_id in ids and s.first_message_id in ids:
                return s
        return None

    # -- search ------------------------------------------------------------------
    def search(self, text: str, limit: int = 50) -> list[tuple[Conversation, Message, str]]:
        """Messages matching ``text`` (full-text), with a highlighted snippet."""
        query = " ".join('"' + w.replace('"', '""') + '"' for w in text.split())
        if not query:
            return []
        rows = self._rows(
            "SELECT m.*, snippet(messages_fts, 0, '[', ']', '…', 12) AS snip "
            "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?",
            (query, limit),
        )
        return [
            (self.conversation(r["conversation_id"]), message_from_row(r), r["snip"]) for r in rows
        ]

    def integrity_check(self) -> str:
        return str(self._rows("PRAGMA integrity_check")[0][0])


def _rowid(cursor: sqlite3.Cursor) -> int:
    """The id SQLite gave the row just inserted."""
    assert cursor.lastrowid is not None
    return cursor.lastrowid
