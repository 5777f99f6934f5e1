"""The application layer's attachment intents: attach, take back, and the passages a
question would be (or was) given. ``ChatApp`` holds it as ``attaching``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from vllmchat.core.app.conversations.attaching import attach_file
from vllmchat.core.app.events import AppEvent, AttachmentRemoved
from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import ErrorEvent, ErrorKind


class AttachmentIntents:
    """Attachments of the open conversation (``session()``; None: none is open).
    ``open_pending`` stores a new chat that waits for its first message, since a file
    attached to it is its first content (its events come first)."""

    def __init__(
        self,
        store: ConversationStore,
        attachments: AttachmentList,
        session: Callable[[], ChatSession | None],
        open_pending: Callable[[], Iterator[AppEvent]],
    ) -> None:
        self._store, self._attachments = store, attachments
        self._session, self._open_pending = session, open_pending

    def attach(self, path: str | Path) -> Iterator[AppEvent]:
        """Attach a file to the next user message: ``AttachmentAdded`` (whole, or answered
        from passages) or ``AttachmentRejected`` with the reason (nothing changes then)."""
        yield from self._open_pending()
        yield from attach_file(self._session(), path)

    def detach(self, attachment_id: int) -> Iterator[AppEvent]:
        """Take back an attachment not sent yet."""
        try:
            self._attachments.remove_pending(attachment_id)
        except StoreError as exc:
            yield ErrorEvent(ErrorKind.BAD_REQUEST, str(exc))
            return
        yield AttachmentRemoved(attachment_id)

    def passages_for(self, question: str) -> list[ChunkHit]:
        """The passages a question sent now would be given (nothing is stored)."""
        session = self._session()
        return session.passages_for(question) if session is not None else []

    def last_passages(self) -> list[ChunkHit]:
        """The passages the branch's last reply was given (none: it had no documents)."""
        session = self._session()
        if session is None:
            return []
        path = self._store.path(session.conversation_id)
        replies = [m for m in path if m.role == "assistant"]
        return self._attachments.used_by(replies[-1].id) if replies else []
