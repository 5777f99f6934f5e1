"""Attachments in SQLite: their rows, their chunks in an FTS5 index, retrieval.

``SCHEMA`` is the conversation store's migration that adds them (frozen: a change is
a new migration). The functions take the store's connection inside its transaction;
they are the only SQL that touches these tables.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from vllmchat.core.attachments.model import (
    Attachment,
    Chunk,
    ChunkHit,
    ExtractedDocument,
    Mode,
    sections_from_json,
    sections_to_json,
)

SCHEMA = """
CREATE TABLE attachments (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    message_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,  -- NULL: for the next one
    kind TEXT NOT NULL CHECK (kind IN ('document', 'image')),
    name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    mime TEXT NOT NULL DEFAULT '',
    size INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL DEFAULT '',
    sections TEXT NOT NULL DEFAULT '[]',  -- [[start, end, page, heading], ...]
    pages INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    mode TEXT NOT NULL DEFAULT 'whole' CHECK (mode IN ('whole', 'retrieval', 'image')),
    data BLOB,  -- an image's bytes
    path TEXT NOT NULL DEFAULT '',  -- or where they are kept
    meta TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL
);
CREATE INDEX attachments_by_message ON attachments(message_id);
CREATE INDEX attachments_by_conversation ON attachments(conversation_id, id);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    attachment_id INTEGER NOT NULL REFERENCES attachments(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    start INTEGER NOT NULL,
    stop INTEGER NOT NULL,
    text TEXT NOT NULL,
    page INTEGER,
    section TEXT NOT NULL DEFAULT '',
    first_line INTEGER NOT NULL DEFAULT 0,
    last_line INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX chunks_by_attachment ON chunks(attachment_id, seq);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, section, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, section) VALUES (new.id, new.text, new.section);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, section)
        VALUES ('delete', old.id, old.text, old.section);
END;
CREATE TABLE chunks_used (  -- the chunks a reply was given (message_id: the reply's)
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,
    PRIMARY KEY (message_id, chunk_id)
);
"""

_STOP = """a an the and or but if of in on at to for from by with about as into over under
    than then this that these those is are was were be been being do does did done have
    has had having what which who whom whose when where why how me my we our you your he
    she it its they them their there here not no yes can could would should will shall
    may might must also just so very much many more most some any all each every tell
    say said please know think does give find show document file text page section
    according mentioned again anything something"""
STOPWORDS = frozenset(_STOP.split())
_COLUMNS = (
    "id, conversation_id, message_id, kind, name, sha256, mime, size, text, sections, "
    "pages, tokens, mode, created, data, meta"
)


def insert_document(
    db: sqlite3.Connection,
    conversation_id: int,
    doc: ExtractedDocument,
    *,
    tokens: int,
    mode: Mode,
    chunks: Sequence[Chunk],
    message_id: int | None = None,
) -> int:
    """Store a document and index its chunks; returns its id."""
    cur = db.execute(
        "INSERT INTO attachments(conversation_id, message_id, kind, name, sha256, mime, size,"
        " text, sections, pages, tokens, mode, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            conversation_id,
            message_id,
            "document",
            doc.name,
            doc.sha256,
            doc.mime,
            doc.size,
            doc.text,
            sections_to_json(doc.sections),
            doc.pages,
            tokens,
            mode,
            time.time(),
        ),
    )
    assert cur.lastrowid is not None
    insert_chunks(db, cur.lastrowid, chunks)
    return cur.lastrowid


def insert_image(
    db: sqlite3.Connection,
    conversation_id: int,
    *,
    name: str,
    sha256: str,
    mime: str,
    data: bytes,
    meta: dict[str, Any] | None = None,
    tokens: int = 0,
    message_id: int | None = None,
) -> int:
    """Store an image (its bytes in the row); returns its id."""
    cur = db.execute(
        "INSERT INTO attachments(conversation_id, message_id, kind, name, sha256, mime, size,"
        " tokens, mode, data, meta, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            conversation_id,
            message_id,
            "image",
            name,
            sha256,
            mime,
            len(data),
            tokens,
            "image",
            data,
            json.dumps(meta or {}),
            time.time(),
        ),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def insert_chunks(db: sqlite3.Connection, attachment_id: int, chunks: Iterable[Chunk]) -> None:
    db.executemany(
        "INSERT INTO chunks(attachment_id, seq, start, stop, text, page, section, first_line,"
        " last_line) VALUES (?,?,?,?,?,?,?,?,?)",
        [
            (attachment_id, c.seq, c.start, c.end, c.text, c.page, c.section, *c.lines)
            for c in chunks
        ],
    )


def attachment_from_row(row: Sequence[Any]) -> Attachment:
    """An ``Attachment`` from a row of ``_COLUMNS``."""
    (
        id_,
        conv,
        message,
        kind,
        name,
        sha,
        mime,
        size,
        text,
        sections,
        pages,
        tokens,
        mode,
        created,
        data,
        meta,
    ) = row
    return Attachment(
        id_,
        conv,
        message,
        kind,
        name,
        sha,
        mime,
        size,
        text,
        sections_from_json(sections),
        pages,
        tokens,
        mode,
        created,
        None if data is None else bytes(data),
        json.loads(meta or "{}"),
    )


def attachments_where(db: sqlite3.Connection, where: str, args: Sequence[Any]) -> list[Attachment]:
    rows = db.execute(f"SELECT {_COLUMNS} FROM attachments WHERE {where} ORDER BY id", args)
    return [attachment_from_row(tuple(r)) for r in rows.fetchall()]


def attachments_of(db: sqlite3.Connection, message_ids: Sequence[int]) -> list[Attachment]:
    """The attachments of these messages, in the order they were attached."""
    if not message_ids:
        return []
    marks = ",".join("?" * len(message_ids))
    return attachments_where(db, f"message_id IN ({marks})", tuple(message_ids))


def copy_attachments(db: sqlite3.Connection, from_message: int, to_message: int) -> None:
    """Copy the attachments of one message (and their chunks) to another."""
    rows = db.execute(
        "SELECT id FROM attachments WHERE message_id=? ORDER BY id", (from_message,)
    ).fetchall()
    for (old,) in rows:
        cur = db.execute(
            "INSERT INTO attachments(conversation_id, message_id, kind, name, sha256, mime, "
            "size, text, sections, pages, tokens, mode, data, path, meta, created) "
            "SELECT conversation_id, ?, kind, name, sha256, mime, size, text, sections, pages, "
            "tokens, mode, data, path, meta, created FROM attachments WHERE id=?",
            (to_message, old),
        )
        db.execute(
            "INSERT INTO chunks(attachment_id, seq, start, stop, text, page, section, "
            "first_line, last_line) SELECT ?, seq, start, stop, text, page, section, "
            "first_line, last_line FROM chunks WHERE attachment_id=? ORDER BY seq",
            (cur.lastrowid, old),
        )


def chunks_of(db: sqlite3.Connection, attachment_id: int) -> list[Chunk]:
    rows = db.execute(
        "SELECT seq, start, stop, text, page, section, first_line, last_line FROM chunks "
        "WHERE attachment_id=? ORDER BY seq",
        (attachment_id,),
    ).fetchall()
    return [Chunk(r[0], r[1], r[2], r[3], r[4], r[5], (r[6], r[7])) for r in rows]


def fts_query(question: str) -> str:
    """An FTS5 query matching any key word of ``question`` (stop words left out)."""
    seen: list[str] = []
    for word in re.findall(r"\w+", question.lower()):
        if (len(word) > 2 or word.isdigit()) and word not in STOPWORDS and word not in seen:
            seen.append(word)
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in seen)


_HIT = (
    "SELECT c.id, c.attachment_id, a.name, c.seq, c.text, c.page, c.section, c.first_line, "
    "c.last_line, {score} FROM {source} JOIN chunks c ON c.id = {key} "
    "JOIN attachments a ON a.id = c.attachment_id"
)


def _hit(r: Sequence[Any]) -> ChunkHit:
    return ChunkHit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], (r[7], r[8]), float(r[9]))


def search(
    db: sqlite3.Connection, attachment_ids: Sequence[int], question: str, k: int
) -> list[ChunkHit]:
    """The ``k`` chunks of these attachments that best match ``question`` (BM25, the
    section heading weighing less than the text), best first."""
    query = fts_query(question)
    if not query or not attachment_ids or k <= 0:
        return []
    marks = ",".join("?" * len(attachment_ids))
    sql = _HIT.format(
        score="bm25(chunks_fts, 1.0, 0.4)", source="chunks_fts", key="chunks_fts.rowid"
    )
    rows = db.execute(
        f"{sql} WHERE chunks_fts MATCH ? AND c.attachment_id IN ({marks}) ORDER BY 10 LIMIT ?",
        (query, *attachment_ids, k),
    ).fetchall()
    return [_hit(tuple(r)) for r in rows]


def record_used(db: sqlite3.Connection, message_id: int, hits: Sequence[ChunkHit]) -> None:
    """Remember which chunks the reply ``message_id`` was given, in rank order."""
    db.executemany(
        "INSERT OR REPLACE INTO chunks_used(message_id, chunk_id, rank) VALUES (?,?,?)",
        [(message_id, h.chunk_id, rank) for rank, h in enumerate(hits)],
    )


def used_by(db: sqlite3.Connection, message_id: int) -> list[ChunkHit]:
    """The chunks the reply ``message_id`` was given, in rank order."""
    sql = _HIT.format(score="u.rank", source="chunks_used u", key="u.chunk_id")
    rows = db.execute(f"{sql} WHERE u.message_id=? ORDER BY u.rank", (message_id,)).fetchall()
    return [_hit(tuple(r)) for r in rows]


def hits_of(db: sqlite3.Connection, scored: Sequence[tuple[int, float]]) -> list[ChunkHit]:
    """The chunks ``scored`` names (id, score), in that order, with their score."""
    if not scored:
        return []
    marks = ",".join("?" * len(scored))
    sql = _HIT.format(score="0.0", source="chunks c0", key="c0.id")
    rows = db.execute(f"{sql} WHERE c0.id IN ({marks})", [cid for cid, _ in scored]).fetchall()
    found = {int(r[0]): _hit(tuple(r)) for r in rows}
    return [replace(found[cid], score=score) for cid, score in scored if cid in found]
