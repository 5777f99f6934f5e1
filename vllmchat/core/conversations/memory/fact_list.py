"""A conversation's facts: kept word for word through every summary, edited by the user.

The facts are the user's statements, taken from their messages as they are stored
(``stated.py`` says which sentences count), and the facts the user adds or edits.
``FactList`` is their one owner: front ends send it intents (``add``, ``edit``,
``delete``) and listen for ``FactsChanged``; none keeps a copy.

A fact taken from a message belongs to that message's branch, and a later
statement on the same subject supersedes it; a fact the user wrote or edited is
never superseded. A taken fact enters the prompt once its message has left the
verbatim history (summarized or left out, as pinned messages do); one the user
wrote is in every prompt.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from vllmchat.core.conversations.events import Fact, FactsChanged
from vllmchat.core.conversations.memory.facts import MAX_FACT_CHARS, bounded
from vllmchat.core.conversations.memory.stated import same_subject, statements, superseded
from vllmchat.core.conversations.store.store import ConversationStore, Message, StoreError
from vllmchat.core.listeners import Listeners

__all__ = ["Fact", "FactList", "FactsChanged", "checked_text"]  # the values live in events
PROMPT_HEADER = "Facts the user gave, word for word:"


Listener = Callable[[FactsChanged], None]


def checked_text(text: str) -> str:
    """A fact's text on one line; ``StoreError`` saying what is wrong with it."""
    line = " ".join(text.split())
    if not line:
        raise StoreError("A fact needs some text.")
    if len(line) > MAX_FACT_CHARS:
        raise StoreError(
            f"A fact holds at most {MAX_FACT_CHARS} characters; this one has {len(line)}. "
            "Shorten it or split it into two."
        )
    return line


class FactList:
    """The facts of every conversation in ``store``; safe to use from several threads."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self._listeners: Listeners[FactsChanged] = Listeners("facts")

    # -- listening ---------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (in the changing thread) after every change; returns the
        call that unsubscribes it."""
        return self._listeners.subscribe(listener)

    def _changed(self, conversation_id: int) -> FactsChanged:
        event = FactsChanged(conversation_id, self.facts(conversation_id))
        self._listeners.tell(event)
        return event

    # -- reading -----------------------------------------------------------------------
    def facts(
        self, conversation_id: int, path: Sequence[Message] | None = None
    ) -> tuple[Fact, ...]:
        """The facts of a branch (default: the current one), oldest first, those a later
        statement supersedes left out."""
        if path is None:
            path = self.store.path_to_show(conversation_id)
        self._take(path)
        rows = self.store.db.execute(
            "SELECT * FROM facts WHERE conversation_id=? ORDER BY id", (conversation_id,)
        ).fetchall()
        ids = {m.id for m in path}
        active = [_fact(r) for r in rows if r["message_id"] is None or r["message_id"] in ids]
        gone = superseded([f.text for f in active])
        return tuple(f for i, f in enumerate(active) if f.edited or i not in gone)

    def stored(self, conversation_id: int) -> tuple[Fact, ...]:
        """Every fact of a conversation, all branches, superseded ones included (export)."""
        self._take(self.store.all_messages(conversation_id))
        rows = self.store.db.execute(
            "SELECT * FROM facts WHERE conversation_id=? ORDER BY id", (conversation_id,)
        )
        return tuple(_fact(r) for r in rows)

    def prompt_block(self, conversation_id: int, path: Sequence[Message], start: int) -> str:
        """The facts for a prompt that gives ``path[start:]`` word for word: the user's
        own, and those taken from messages before ``start`` that are not pinned."""
        in_place = {m.id for m in path[start:]} | {m.id for m in path if m.pinned}
        texts = [
            f.text
            for f in self.facts(conversation_id, path)
            if f.edited or f.message_id is None or f.message_id not in in_place
        ]
        kept = bounded(tuple(texts))
        return PROMPT_HEADER + "\n" + "\n".join(f"- {t}" for t in kept) if kept else ""

    # -- taking from messages ----------------------------------------------------------
    def take_from(self, message: Message) -> FactsChanged:
        """After a user message is stored: its statements join the list."""
        return self._changed(message.conversation_id)  # reading takes them

    def _take(self, path: Iterable[Message]) -> None:
        """The statements of the user messages on ``path`` never read before (each
        message is read once: a fact the user deleted does not come back)."""
        users = [m for m in path if m.role == "user" and not m.partial]
        if not users:
            return
        taken = {
            r[0]
            for r in self.store.db.execute(
                "SELECT t.id FROM facts_taken t JOIN messages m ON m.id = t.id "
                "WHERE m.conversation_id = ?",
                (users[0].conversation_id,),
            )
        }
        new = [m for m in users if m.id not in taken]
        if new:  # one transaction for all: an old conversation's first opening is one write
            self._write(self._take_all, new)

    @staticmethod
    def _take_all(db: sqlite3.Connection, messages: Sequence[Message]) -> None:
        for message in messages:
            if not db.execute(
                "INSERT OR IGNORE INTO facts_taken(id) VALUES (?)", (message.id,)
            ).rowcount:
                continue
            for text in statements([message.content]):
                db.execute(
                    "INSERT INTO facts(conversation_id, message_id, text, created) "
                    "VALUES (?,?,?,?)",
                    (message.conversation_id, message.id, text[:MAX_FACT_CHARS], time.time()),
                )

    # -- the user's intents -----------------------------------------------------------
    def add(self, conversation_id: int, text: str) -> FactsChanged:
        """A fact the user writes (in every prompt from now on)."""
        line = checked_text(text)
        self.store.conversation(conversation_id)  # a clear error for an unknown id
        if any(f.text == line for f in self.facts(conversation_id)):
            raise StoreError("That fact is already in the list.")
        self._write(
            lambda db: db.execute(
                "INSERT INTO facts(conversation_id, text, edited, created) VALUES (?,?,1,?)",
                (conversation_id, line, time.time()),
            )
        )
        return self._changed(conversation_id)

    def edit(self, fact_id: int, text: str) -> FactsChanged:
        """The user's wording for a fact (then theirs: in every prompt, never superseded)."""
        line = checked_text(text)
        fact = self.fact(fact_id)
        if line != fact.text and any(f.text == line for f in self.facts(fact.conversation_id)):
            raise StoreError("That fact is already in the list.")
        self._write(
            lambda db: db.execute("UPDATE facts SET text=?, edited=1 WHERE id=?", (line, fact_id))
        )
        return self._changed(fact.conversation_id)

    def delete(self, fact_id: int) -> FactsChanged:
        """Remove a fact, and the earlier statements on its subject that it superseded
        (so an older value does not come back)."""
        fact = self.fact(fact_id)
        path = self.store.path_to_show(fact.conversation_id)
        ids = {m.id for m in path}
        older = [
            r["id"]
            for r in self.store.db.execute(
                "SELECT id, text, message_id, edited FROM facts WHERE conversation_id=? AND id<?",
                (fact.conversation_id, fact_id),
            )
            if not r["edited"] and r["message_id"] in ids and same_subject(r["text"], fact.text)
        ]
        gone = [fact_id, *older]
        marks = ",".join("?" * len(gone))
        self._write(lambda db: db.execute(f"DELETE FROM facts WHERE id IN ({marks})", gone))
        return self._changed(fact.conversation_id)

    def fact(self, fact_id: int) -> Fact:
        row = self.store.db.execute("SELECT * FROM facts WHERE id=?", (fact_id,)).fetchone()
        if row is None:
            raise StoreError(f"There is no fact {fact_id}.")
        return _fact(row)

    def restore(
        self,
        conversation_id: int,
        items: Iterable[tuple[str, int | None, bool]],
        taken: Iterable[int],
    ) -> None:
        """An imported conversation's facts (text, message id, edited) and the user
        messages they were read from."""

        def write(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT OR IGNORE INTO facts_taken(id) VALUES (?)", [(i,) for i in taken]
            )
            for text, message_id, edited in items:
                db.execute(
                    "INSERT INTO facts(conversation_id, message_id, text, edited, created) "
                    "VALUES (?,?,?,?,?)",
                    (conversation_id, message_id, checked_text(text), int(edited), time.time()),
                )

        self._write(write)

    def _write(self, change: Callable[..., Any], *args: Any) -> None:
        """Run ``change(db, *args)`` in one write transaction of the store (another
        process's lock is waited out with a message, as for the store's own writes)."""
        with self.store.transaction():
            change(self.store.db, *args)


def _fact(row: sqlite3.Row) -> Fact:
    return Fact(
        row["id"], row["conversation_id"], row["text"], row["message_id"], bool(row["edited"])
    )
