"""Attachments in the real SQLite store: kept for the next message, bound when it is
sent, copied by an edit, deleted with their conversation, carried by export/import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllmchat.bench.synthetic.pdf_writer import write_pdf
from vllmchat.core.attachments.chunking import chunk_document
from vllmchat.core.attachments.extract import extract
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.transfer import export_file, import_file, to_markdown


@pytest.fixture
def store(tmp_path: Path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def _report(tmp_path: Path):
    pages = ["Intro to the bees.", "The lighthouse door is teal.", "Costs rose."]
    return extract(write_pdf(tmp_path / "report.pdf", pages, bookmarks=[("Results", 2)]))


def test_pending_then_bound_copied_and_deleted(tmp_path: Path, store: ConversationStore):
    conv = store.create().id
    attachments = AttachmentList(store)
    doc = _report(tmp_path)
    att = attachments.add_document(conv, doc, tokens=40, mode="whole", chunks=chunk_document(doc))
    assert attachments.pending(conv) == [att]
    message = store.add_message(conv, "user", "What colour is the door?")
    bound = attachments.bind_pending(conv, message.id)
    assert [a.message_id for a in bound] == [message.id] and attachments.pending(conv) == []
    got = attachments.of_messages([message.id])[message.id][0]
    assert got.text == doc.text and got.sections == doc.sections and got.pages == 3
    with pytest.raises(StoreError, match="stays with it"):
        attachments.remove_pending(got.id)
    edit = store.add_message(conv, "user", "Which colour?", parent_id=0)
    attachments.copy(message.id, edit.id)
    copied = attachments.of_messages([edit.id])[edit.id][0]
    assert copied.id != got.id and attachments.chunks(copied.id) == attachments.chunks(got.id)
    assert attachments.search([copied.id], "lighthouse door", 2)[0].label == "p. 2 · Results"
    store.delete(conv)
    assert attachments.of_conversation(conv) == []
    rows = store.db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert rows == 0
    assert attachments.search([copied.id], "lighthouse", 2) == []


def test_export_and_import_carry_documents_images_and_passages(tmp_path, store):
    conv = store.create().id
    attachments = AttachmentList(store)
    doc = _report(tmp_path)
    attachments.add_document(conv, doc, tokens=900, mode="retrieval", chunks=chunk_document(doc))
    attachments.add_image(
        conv,
        name="cat.png",
        sha256="ab",
        mime="image/png",
        data=b"\x89PNG\r\n\x1a\nfake",
        meta={"width": 4},
    )
    question = store.add_message(conv, "user", "What colour is the door?")
    attachments.bind_pending(conv, question.id)
    reply = store.add_message(conv, "assistant", "Teal.")
    [doc_att] = [a for a in attachments.of_conversation(conv) if a.kind == "document"]
    hits = attachments.search([doc_att.id], "door colour", 2)
    attachments.record_used(reply.id, hits)

    markdown = to_markdown(store, conv)
    assert "📎 *report.pdf* (document, 3 pages" in markdown and "📎 *cat.png*" in markdown
    path = export_file(store, conv, tmp_path / "out.json")
    data = json.loads(path.read_text())
    assert {a["name"] for a in data["attachments"]} == {"report.pdf", "cat.png"}

    imported = import_file(store, path)
    new_path = store.path(imported.id)
    new_question, new_reply = new_path
    found = attachments.of_messages([new_question.id])[new_question.id]
    assert sorted(a.name for a in found) == ["cat.png", "report.pdf"]
    new_doc = next(a for a in found if a.kind == "document")
    assert new_doc.text == doc.text and new_doc.mode == "retrieval"
    assert next(a for a in found if a.kind == "image").data == b"\x89PNG\r\n\x1a\nfake"
    used = attachments.used_by(new_reply.id)
    assert [h.text for h in used] == [h.text for h in hits]
    assert all(h.attachment_id == new_doc.id for h in used)


def test_a_malformed_attachment_imports_nothing(tmp_path, store):
    data = {
        "format": "vllmchat-conversation",
        "version": 1,
        "title": "t",
        "messages": [{"id": 1, "parent_id": None, "role": "user", "content": "hi"}],
        "attachments": [{"kind": "document", "name": 3}],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    before = len(store.conversations())
    with pytest.raises(StoreError, match="attachment 1 is malformed"):
        import_file(store, path)
    assert len(store.conversations()) == before
