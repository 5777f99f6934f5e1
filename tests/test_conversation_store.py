"""The SQLite store: branches, summaries, search, export/import, bad input, durability."""

from __future__ import annotations

import json
import sqlite3

import pytest

from vllmchat.core.conversations.store.store import ROOT, ConversationStore, StoreError
from vllmchat.core.conversations.transfer import export_file, import_file, to_markdown


@pytest.fixture
def store(tmp_path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def _chat(store, turns=3):
    conv = store.create(system_prompt="Be kind.")
    for i in range(turns):
        store.add_message(conv.id, "user", f"question {i} about zebras")
        store.add_message(conv.id, "assistant", f"answer {i} about stripes", token_ids=[1, 2, 3])
    return conv


def test_schema_is_versioned_wal_and_migrates_once(tmp_path):
    path = tmp_path / "c.sqlite3"
    s = ConversationStore(path)
    assert s.version == 8
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()
    again = ConversationStore(path)
    assert again.db.execute("PRAGMA user_version").fetchone()[0] == 8
    again.close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version=99")
    raw.close()
    with pytest.raises(RuntimeError, match="newer"):
        ConversationStore(path)


def test_title_rename_delete(store):
    conv = _chat(store, 1)
    assert store.conversation(conv.id).title == "question 0 about zebras"
    store.rename(conv.id, "Zebras")
    assert store.conversation(conv.id).title == "Zebras"
    store.delete(conv.id)
    assert store.conversations() == []
    assert store.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    with pytest.raises(StoreError):
        store.conversation(conv.id)


def test_branches_keep_the_old_messages(store):
    conv = _chat(store, 2)
    path = store.path(conv.id)
    edited = store.add_message(conv.id, "user", "a different question", parent_id=path[1].id)
    assert [m.content for m in store.path(conv.id)][-1] == "a different question"
    assert len(store.siblings(edited.id)) == 2
    first = store.add_message(conv.id, "user", "new start", parent_id=ROOT)
    assert store.path(conv.id) == [first]
    assert len(store.all_messages(conv.id)) == 6
    assert store.path(conv.id, path[-1].id) == path


def test_summary_applies_to_its_branch(store):
    conv = _chat(store, 3)
    path = store.path(conv.id)
    s = store.add_summary(conv.id, "They talked about zebras.", path[0].id, path[3].id)
    assert store.summary_for(conv.id, path) == s
    store.edit_summary(s.id, "Zebras and stripes.")
    assert store.summary(s.id).edited and store.summary(s.id).content == "Zebras and stripes."
    store.add_message(conv.id, "user", "fresh", parent_id=ROOT)
    assert store.summary_for(conv.id, store.path(conv.id)) is None


def test_full_text_search(store):
    _chat(store, 2)
    other = store.create()
    store.add_message(other.id, "user", "tell me about giraffes")
    hits = store.search("giraffes")
    assert [h[0].id for h in hits] == [other.id] and "[giraffes]" in hits[0][2]
    assert len(store.search("zebras")) == 2
    assert store.search('"quotes" AND OR') == []


def test_export_import_round_trip(store, tmp_path):
    conv = _chat(store, 2)
    conv = store.conversation(conv.id)
    path = store.path(conv.id)
    store.add_summary(conv.id, "Zebras.", path[0].id, path[1].id)
    store.update_message(path[-1].id, partial=True)
    export_file(store, conv.id, tmp_path / "c.json")
    md = export_file(store, conv.id, tmp_path / "c.md").read_text()
    assert "**You:**" in md and "(stopped)" in md and "Summary of the conversation" in md
    back = import_file(store, tmp_path / "c.json")
    a = [(m.role, m.content, m.partial) for m in store.path(conv.id)]
    b = [(m.role, m.content, m.partial) for m in store.path(back.id)]
    assert a == b and back.title == conv.title and back.system_prompt == "Be kind."
    assert store.summaries(back.id)[0].content == "Zebras."
    assert to_markdown(store, back.id) == to_markdown(store, conv.id).replace(
        f"# {conv.title}", f"# {back.title}"
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\xff\xfe{not utf8", "not UTF-8"),
        (b"{broken json", "not valid JSON"),
        (json.dumps({"format": "other"}).encode(), "not a vllmchat conversation"),
        (
            json.dumps({"format": "vllmchat-conversation", "messages": [{"role": "x"}]}).encode(),
            "malformed",
        ),
    ],
)
def test_bad_import_files_get_clear_messages(store, tmp_path, data, words):
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(StoreError, match=words):
        import_file(store, path)
    assert store.conversations() == []


def test_a_one_megabyte_message_is_stored_and_found(store):
    conv = store.create()
    big = ("lorem ipsum dolor " * 60000)[: 1 << 20] + " needle"
    m = store.add_message(conv.id, "user", big)
    assert len(store.message(m.id).content) == len(big)
    assert store.search("needle")[0][1].id == m.id
