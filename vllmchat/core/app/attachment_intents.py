"""The application layer's attachment intents: attach, take back, and the passages a
question would be (or was) given. ``ChatApp`` provides the session and the stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from vllmchat.core.app.attaching import attach_file
from vllmchat.core.app.events import AppEvent, AttachmentRemoved
from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import ErrorEvent, ErrorKind


class AttachmentIntents:
    """Attachments of the open conversation (mixed into ``ChatApp``)."""

    store: ConversationStore
    session: ChatSession | None
    attachments: AttachmentList

    def attach(self, path: str | Path) -> Iterator[AppEvent]:
        """Attach a file to the next user message: ``AttachmentAdded`` (whole, or answered
        from passages) or ``AttachmentRejected`` with the reason (nothing changes then)."""
        yield from attach_file(self.session, path)

    def detach(self, attachment_id: int) -> Iterator[AppEvent]:
        """Take back an attachment not sent yet."""
        try:
            self.attachments.remove_pending(attachment_id)
        except StoreError as exc:
            yield ErrorEvent(ErrorKind.BAD_REQUEST, str(exc))
            return
        yield AttachmentRemoved(attachment_id)

    def passages_for(self, question: str) -> list[ChunkHit]:
        """The passages a question sent now would be given (nothing is stored)."""
        return self.session.passages_for(question) if self.session is not None else []

    def last_passages(self) -> list[ChunkHit]:
        """The passages the branch's last reply was given (none: it had no documents)."""
        if self.session is None:
            return []
        path = self.store.path(self.session.conversation_id)
        replies = [m for m in path if m.role == "assistant"]
        return self.attachments.used_by(replies[-1].id) if replies else []
