"""The changes a user makes to the stored conversations, each announced as an event.

New, rename, pin, a summary rewritten by hand and import touch only the store,
which serialises its writes: a front end may ask for them from its own thread and
gets back the event that announces the change (``EditRefused`` with the reason when
it was not made, nothing changed). Deleting goes through ``ChatApp``, which lets go
of the open conversation first.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from vllmchat.core.app.events import (
    ConversationCreated,
    ConversationDeleted,
    ConversationImported,
    ConversationRenamed,
    EditRefused,
    MessagePinned,
    SummaryEdited,
)
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.transfer import import_file

_log = logging.getLogger(__name__)
Made = TypeVar("Made")
MAX_TITLE_CHARS = 200


class ConversationEdits:
    """The store's user-made changes; each returns its event."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def attempt(self, action: str, change: Callable[[], Made]) -> Made | EditRefused:
        """``change()``'s event, or why it was refused (a store that cannot be written)."""
        try:
            return change()
        except StoreError as exc:
            return EditRefused(action, str(exc))
        except (sqlite3.Error, OSError) as exc:
            _log.error("The %s could not be stored: %s", action, exc, exc_info=exc)
            return EditRefused(action, f"The change could not be stored: {exc}.")

    def create(self, *, system_prompt: str = "") -> ConversationCreated | EditRefused:
        """A new, empty conversation."""
        return self.attempt(
            "new",
            lambda: ConversationCreated(self.store.create(system_prompt=system_prompt).id),
        )

    def rename(self, conversation_id: int, title: str) -> ConversationRenamed | EditRefused:
        """Give a conversation the title ``title`` (spaces at the ends dropped)."""
        title = " ".join(title.split())
        if not title:
            return EditRefused("rename", "A title needs at least one character.")
        if len(title) > MAX_TITLE_CHARS:
            return EditRefused("rename", f"A title has at most {MAX_TITLE_CHARS} characters.")

        def rename() -> ConversationRenamed:
            self.store.rename(conversation_id, title)
            return ConversationRenamed(conversation_id, title)

        return self.attempt("rename", rename)

    def pin(self, message_id: int, pinned: bool) -> MessagePinned | EditRefused:
        """Pin a message (word for word in every prompt, never summarized) or unpin it."""

        def pin() -> MessagePinned:
            message = self.store.set_pinned(message_id, pinned)
            return MessagePinned(message.conversation_id, message_id, message.pinned)

        return self.attempt("pin", pin)

    def edit_summary(self, summary_id: int, text: str) -> SummaryEdited | EditRefused:
        """Rewrite a summary by hand; later summaries keep what it says."""
        text = text.strip()
        if not text:
            return EditRefused("summary", "A summary cannot be empty: delete words, not all.")

        def edit() -> SummaryEdited:
            conversation_id = self.store.summary(summary_id).conversation_id
            self.store.edit_summary(summary_id, text)
            return SummaryEdited(conversation_id, summary_id, text)

        return self.attempt("summary", edit)

    def import_file(self, path: str | Path) -> ConversationImported | EditRefused:
        """A JSON export stored as a new conversation (a bad file: nothing stored)."""

        def imported() -> ConversationImported:
            conversation = import_file(self.store, path)
            return ConversationImported(conversation.id, conversation.title)

        return self.attempt("import", imported)

    def delete(self, conversation_id: int) -> ConversationDeleted | EditRefused:
        """Delete a conversation with its messages and summaries (``ChatApp.delete``
        lets go of it first when it is open)."""

        def delete() -> ConversationDeleted:
            self.store.delete(conversation_id)
            return ConversationDeleted(conversation_id)

        return self.attempt("delete", delete)
