"""Chunk vectors in SQLite and hybrid ranking: FTS5's BM25 and cosine similarity,
fused by reciprocal rank (RRF).

``SCHEMA`` is the conversation store's migration that adds them (frozen: a change is
a new migration). A vector belongs to a chunk and the embedding model that made it
(its file's name and size), so another model's vectors are never compared; they are
float32, unit length, so cosine is a dot product.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Iterable, Sequence

SCHEMA = """
CREATE TABLE chunk_vectors (
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (chunk_id, model)
);
"""

RRF_K = 60  # the usual constant: a rank's weight is 1 / (60 + rank)

Vector = Sequence[float]


def pack(vector: Vector) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> array[float]:
    out = array("f")
    out.frombytes(blob)
    return out


def missing(
    db: sqlite3.Connection, attachment_ids: Sequence[int], model: str
) -> list[tuple[int, str]]:
    """The chunks of these attachments without a vector from ``model``: (id, text)."""
    if not attachment_ids:
        return []
    marks = ",".join("?" * len(attachment_ids))
    rows = db.execute(
        f"SELECT c.id, c.text FROM chunks c LEFT JOIN chunk_vectors v "
        f"ON v.chunk_id = c.id AND v.model = ? WHERE c.attachment_id IN ({marks}) "
        f"AND v.chunk_id IS NULL ORDER BY c.attachment_id, c.seq",
        (model, *attachment_ids),
    ).fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]


def insert(db: sqlite3.Connection, model: str, items: Iterable[tuple[int, Vector]]) -> None:
    db.executemany(
        "INSERT OR REPLACE INTO chunk_vectors(chunk_id, model, dim, vector) VALUES (?,?,?,?)",
        [(cid, model, len(v), pack(v)) for cid, v in items],
    )


def nearest(
    db: sqlite3.Connection, attachment_ids: Sequence[int], model: str, query: Vector, k: int
) -> list[tuple[int, float]]:
    """The ``k`` chunks closest to ``query`` by cosine: (id, similarity), best first."""
    if not attachment_ids or k <= 0:
        return []
    marks = ",".join("?" * len(attachment_ids))
    rows = db.execute(
        f"SELECT v.chunk_id, v.vector FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
        f"WHERE v.model = ? AND v.dim = ? AND c.attachment_id IN ({marks})",
        (model, len(query), *attachment_ids),
    ).fetchall()
    q = list(query)
    scored = [
        (int(cid), sum(a * b for a, b in zip(q, unpack(blob), strict=True))) for cid, blob in rows
    ]
    scored.sort(key=lambda s: -s[1])
    return scored[:k]


def fuse(*rankings: Sequence[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each id's sum of 1 / (k + rank) over the rankings
    (rank from 1), best first; ties keep the first ranking's order."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda s: -s[1])
