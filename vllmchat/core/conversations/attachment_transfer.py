"""Attachments in a conversation's JSON export, and back on import.

A document travels as its text, page and section map, tokens, mode and chunks (so
retrieval after an import finds the same passages), an image as its bytes in
base64; the passages a reply was given travel with the reply.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from vllmchat.core.attachments.model import Chunk, ExtractedDocument, Mode, Section
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore, StoreError


def attachments_to_json(store: ConversationStore, conversation_id: int) -> list[dict[str, Any]]:
    """Every attachment of the conversation, with its chunks and where they were used."""
    attachments = AttachmentList(store)
    used: dict[int, list[int]] = {}
    for m in store.all_messages(conversation_id):
        for hit in attachments.used_by(m.id) if m.role == "assistant" else []:
            used.setdefault(hit.chunk_id, []).append(m.id)
    out = []
    for att in attachments.of_conversation(conversation_id):
        ids = _chunk_ids(store, att.id)
        chunks = attachments.chunks(att.id)
        item: dict[str, Any] = {
            "id": att.id,
            "message_id": att.message_id,
            "kind": att.kind,
            "name": att.name,
            "sha256": att.sha256,
            "mime": att.mime,
            "size": att.size,
            "text": att.text,
            "sections": [[s.start, s.end, s.page, s.heading] for s in att.sections],
            "pages": att.pages,
            "tokens": att.tokens,
            "mode": att.mode,
            "meta": att.meta,
            "chunks": [
                [c.start, c.end, c.page, c.section, *c.lines, used.get(ids[c.seq], [])]
                for c in chunks
            ],
        }
        if att.data is not None:
            item["data"] = base64.b64encode(att.data).decode("ascii")
        out.append(item)
    return out


def _chunk_ids(store: ConversationStore, attachment_id: int) -> dict[int, int]:
    rows = store.waits.call(
        lambda: store.db.execute(
            "SELECT seq, id FROM chunks WHERE attachment_id=?", (attachment_id,)
        ).fetchall()
    )
    return {int(r[0]): int(r[1]) for r in rows}


def check_attachments(data: Mapping[str, Any], ids: set[Any], name: str) -> list[dict[str, Any]]:
    """An export's attachments, checked before anything is imported."""
    items = data.get("attachments") or []
    if not isinstance(items, list):
        raise StoreError(f"{name} has malformed attachments.")
    for n, a in enumerate(items, 1):
        ok = (
            isinstance(a, dict)
            and a.get("kind") in ("document", "image")
            and isinstance(a.get("name"), str)
            and isinstance(a.get("text", ""), str)
            and (a.get("message_id") is None or a.get("message_id") in ids)
            and isinstance(a.get("chunks", []), list)
            and (a.get("kind") == "document" or isinstance(a.get("data"), str))
        )
        if not ok:
            raise StoreError(f"{name}: attachment {n} is malformed.")
    return items


def import_attachments(
    store: ConversationStore,
    conversation_id: int,
    items: list[dict[str, Any]],
    message_ids: Mapping[Any, int],
) -> None:
    """Add checked attachments to the imported conversation (``message_ids``: the
    export's message ids to the new ones)."""
    attachments = AttachmentList(store)
    for a in items:
        message = message_ids.get(a.get("message_id"))
        try:
            if a["kind"] == "image":
                attachments.add_image(
                    conversation_id,
                    name=a["name"],
                    sha256=str(a.get("sha256", "")),
                    mime=str(a.get("mime", "")),
                    data=base64.b64decode(a["data"]),
                    meta=dict(a.get("meta") or {}),
                    tokens=int(a.get("tokens") or 0),
                    message_id=message,
                )
                continue
            text = a.get("text", "")
            sections = tuple(Section(int(s), int(e), p, str(h)) for s, e, p, h in a["sections"])
            doc = ExtractedDocument(
                a["name"],
                str(a.get("sha256", "")),
                str(a.get("mime", "")),
                int(a.get("size") or 0),
                text,
                sections,
                int(a.get("pages") or 0),
            )
            chunks = []
            for seq, (s, e, p, h, first, last, _) in enumerate(a.get("chunks", [])):
                chunks.append(
                    Chunk(
                        seq,
                        int(s),
                        int(e),
                        text[int(s) : int(e)],
                        p,
                        str(h),
                        (int(first), int(last)),
                    )
                )
            mode: Mode = "whole" if a.get("mode") == "whole" else "retrieval"
            tokens = int(a.get("tokens") or 0)
            att = attachments.add_document(
                conversation_id, doc, tokens=tokens, mode=mode, chunks=chunks, message_id=message
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"An attachment ({a.get('name')}) is malformed: {exc!r}.") from exc
        _restore_used(store, att.id, a.get("chunks", []), message_ids)


def _restore_used(
    store: ConversationStore, attachment_id: int, chunks: list[Any], message_ids: Mapping[Any, int]
) -> None:
    ids = _chunk_ids(store, attachment_id)
    rows = [
        (message_ids[m], ids[seq], 0)
        for seq, c in enumerate(chunks)
        for m in c[6]
        if m in message_ids and seq in ids
    ]
    if rows:
        with store.transaction():
            store.db.executemany(
                "INSERT OR REPLACE INTO chunks_used(message_id, chunk_id, rank) VALUES (?,?,?)",
                rows,
            )
