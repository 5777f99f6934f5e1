"""A conversation's attachments in the store: documents (text, page and section map,
chunks in an FTS5 index) and images, each bound to the user message it was attached
to, or waiting for the next one.

``AttachmentList`` is their one owner in the store, as ``FactList`` is of the facts:
every write goes through the store's transaction (and its lock waits).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllmchat.core.attachments import index
from vllmchat.core.attachments.model import (
    Attachment,
    Chunk,
    ChunkHit,
    ExtractedDocument,
    Mode,
)
from vllmchat.core.conversations.store.store import ConversationStore, StoreError


class AttachmentList:
    """The attachments of every conversation in ``store``."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def add_document(
        self,
        conversation_id: int,
        doc: ExtractedDocument,
        *,
        tokens: int,
        mode: Mode,
        chunks: Sequence[Chunk],
        message_id: int | None = None,
    ) -> Attachment:
        """Keep a document (for the next message unless ``message_id``) and index it."""
        with self.store.transaction():
            new = index.insert_document(
                self.store.db,
                conversation_id,
                doc,
                tokens=tokens,
                mode=mode,
                chunks=chunks,
                message_id=message_id,
            )
        return self.get(new)

    def add_image(
        self,
        conversation_id: int,
        *,
        name: str,
        sha256: str,
        mime: str,
        data: bytes,
        meta: dict[str, Any] | None = None,
        tokens: int = 0,
        message_id: int | None = None,
    ) -> Attachment:
        """Keep an image's bytes (for the next message unless ``message_id``)."""
        with self.store.transaction():
            new = index.insert_image(
                self.store.db,
                conversation_id,
                name=name,
                sha256=sha256,
                mime=mime,
                data=data,
                meta=meta,
                tokens=tokens,
                message_id=message_id,
            )
        return self.get(new)

    def get(self, attachment_id: int) -> Attachment:
        found = self._where("id=?", (attachment_id,))
        if not found:
            raise StoreError(f"There is no attachment {attachment_id}.")
        return found[0]

    def pending(self, conversation_id: int) -> list[Attachment]:
        """The attachments waiting for the conversation's next user message."""
        return self._where("conversation_id=? AND message_id IS NULL", (conversation_id,))

    def of_conversation(self, conversation_id: int) -> list[Attachment]:
        return self._where("conversation_id=?", (conversation_id,))

    def of_messages(self, message_ids: Sequence[int]) -> dict[int, list[Attachment]]:
        """The attachments of these messages, by message."""
        out: dict[int, list[Attachment]] = {}
        for att in self.store.waits.call(lambda: index.attachments_of(self.store.db, message_ids)):
            assert att.message_id is not None
            out.setdefault(att.message_id, []).append(att)
        return out

    def bind_pending(self, conversation_id: int, message_id: int) -> list[Attachment]:
        """Give the waiting attachments to ``message_id`` (the message just sent)."""
        waiting = self.pending(conversation_id)
        if waiting:
            with self.store.transaction():
                self.store.db.execute(
                    "UPDATE attachments SET message_id=? WHERE conversation_id=? AND "
                    "message_id IS NULL",
                    (message_id, conversation_id),
                )
        return [self.get(a.id) for a in waiting]

    def copy(self, from_message: int, to_message: int) -> None:
        """Give ``to_message`` (an edit of ``from_message``) the same attachments."""
        with self.store.transaction():
            index.copy_attachments(self.store.db, from_message, to_message)

    def remove_pending(self, attachment_id: int) -> None:
        """Take back an attachment not yet sent (one already sent stays with its message)."""
        if self.get(attachment_id).message_id is not None:
            raise StoreError("This attachment was sent with a message; it stays with it.")
        with self.store.transaction():
            self.store.db.execute("DELETE FROM attachments WHERE id=?", (attachment_id,))

    def chunks(self, attachment_id: int) -> list[Chunk]:
        return self.store.waits.call(lambda: index.chunks_of(self.store.db, attachment_id))

    def search(self, attachment_ids: Sequence[int], question: str, k: int) -> list[ChunkHit]:
        """The ``k`` chunks of these attachments that best match ``question``."""
        db = self.store.db
        return self.store.waits.call(lambda: index.search(db, attachment_ids, question, k))

    def record_used(self, reply_id: int, hits: Sequence[ChunkHit]) -> None:
        """Remember the passages the reply ``reply_id`` was given."""
        if hits:
            with self.store.transaction():
                index.record_used(self.store.db, reply_id, hits)

    def used_by(self, reply_id: int) -> list[ChunkHit]:
        """The passages the reply ``reply_id`` was given, in rank order."""
        return self.store.waits.call(lambda: index.used_by(self.store.db, reply_id))

    def _where(self, where: str, args: tuple[Any, ...]) -> list[Attachment]:
        return self.store.waits.call(lambda: index.attachments_where(self.store.db, where, args))
