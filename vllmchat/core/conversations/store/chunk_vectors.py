"""Chunk vectors in the store (schema 8): the one owner of the ``chunk_vectors`` table,
as ``AttachmentList`` is of the attachments. Every write goes through the store's
transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vllmchat.core.attachments import index, vectors
from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.conversations.store.store import ConversationStore


class ChunkVectors:
    """The vectors of every conversation's chunks in ``store``, by embedding model."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def missing(self, attachment_ids: Sequence[int], model: str) -> list[tuple[int, str]]:
        """The chunks of these attachments ``model`` has not embedded yet: (id, text)."""
        db = self.store.db
        return self.store.waits.call(lambda: vectors.missing(db, attachment_ids, model))

    def add(self, model: str, items: Iterable[tuple[int, vectors.Vector]]) -> None:
        with self.store.transaction():
            vectors.insert(self.store.db, model, items)

    def nearest(
        self, attachment_ids: Sequence[int], model: str, query: vectors.Vector, k: int
    ) -> list[tuple[int, float]]:
        db = self.store.db
        return self.store.waits.call(lambda: vectors.nearest(db, attachment_ids, model, query, k))

    def hits(self, scored: Sequence[tuple[int, float]]) -> list[ChunkHit]:
        """The chunks ``scored`` names, in that order, as passages."""
        return self.store.waits.call(lambda: index.hits_of(self.store.db, scored))
