"""Hybrid retrieval: where an embedding model is set, a question's passages are ranked
by FTS5 (BM25) and by cosine similarity of embeddings, fused by reciprocal rank.

The chunks' vectors are computed by the engine process the first time a question
needs them (on the engine's thread, never the window's) and kept in the store (schema
7), so each chunk is embedded once per embedding model. The work is stoppable: it
goes in batches, each its own stoppable engine call, and what was computed is kept;
a stopped or failed embedding leaves the question to FTS5 alone, and says why in the
log. Without an embedding model, or on an engine that computes none (a server), the
ranking is FTS5's alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.attachments.vectors import fuse
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.chunk_vectors import ChunkVectors
from vllmchat.core.engine.embedding import can_embed, embed
from vllmchat.core.engine.events import EngineError

BATCH = 8  # chunks a stoppable engine call embeds
POOL = 4  # each ranking offers this many times the passages asked for (at least 24)

_log = logging.getLogger(__name__)


def model_key(model_path: str) -> str:
    """What a vector is bound to: the embedding model's file name and size."""
    try:
        size = os.path.getsize(model_path)
    except OSError:
        size = 0
    return f"{os.path.basename(model_path)}:{size}"


class HybridSearch:
    """FTS5 and cosine, fused (RRF); FTS5 alone when no embedding can be had."""

    def __init__(
        self,
        attachments: AttachmentList,
        engine: object,
        model_path: str,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.attachments = attachments
        self.vectors = ChunkVectors(attachments.store)
        self.engine = engine
        self.model_path = model_path
        self.model = model_key(model_path)
        self.should_stop = should_stop

    @property
    def usable(self) -> bool:
        return bool(self.model_path) and can_embed(self.engine)

    def index(self, attachment_ids: Sequence[int]) -> int:
        """Embed the chunks of these attachments that have no vector yet; returns how
        many are still missing (0: all done; more: stopped)."""
        todo = self.vectors.missing(attachment_ids, self.model)
        for start in range(0, len(todo), BATCH):
            if self.should_stop():
                break
            batch = todo[start : start + BATCH]
            found = embed(self.engine, self.model_path, [text for _, text in batch])
            self.vectors.add(self.model, zip([cid for cid, _ in batch], found, strict=False))
            if len(found) < len(batch):
                break  # stopped inside the batch
        return len(self.vectors.missing(attachment_ids, self.model))

    def search(self, attachment_ids: Sequence[int], question: str, k: int) -> list[ChunkHit]:
        """The ``k`` best passages for ``question``, best first."""
        pool = max(POOL * k, 24)
        fts = self.attachments.search(attachment_ids, question, pool)
        if k <= 0 or not self.usable:
            return fts[:k]
        try:
            self.index(attachment_ids)
            found = embed(self.engine, self.model_path, [question])
        except EngineError as exc:
            _log.warning("Passages by FTS5 alone: the embedding failed (%s).", exc.message)
            return fts[:k]
        if not found:
            return fts[:k]  # stopped
        near = self.vectors.nearest(attachment_ids, self.model, found[0], pool)
        fused = fuse([h.chunk_id for h in fts], [cid for cid, _ in near])[:k]
        return self.vectors.hits(fused)
