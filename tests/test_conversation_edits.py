"""The user's changes to stored conversations go through the application layer
(``ChatApp.edits``, ``delete_conversation``), are announced as typed events, and the
window's widgets follow those events. Real store, real widgets offscreen; only the
modal dialogs (title, confirmation, file choice) are answered by the test, since
nobody can click them here."""

from __future__ import annotations

import json

import pytest
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    ConversationDeleted,
    ConversationImported,
    ConversationRenamed,
    EditRefused,
    MessagePinned,
    SummaryEdited,
)
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.transfer import FORMAT
from vllmchat.core.conversations.turns.kv_cache import KVStateCache

TIMEOUT = 20_000


@pytest.fixture
def app(tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    chat = ChatApp(store, KVStateCache(tmp_path / "kv"))  # the engine starts at a first load
    yield chat
    chat.shutdown()
    store.close()


def _conversation(store: ConversationStore, title: str = "Trip") -> tuple[int, int, int]:
    """A conversation with a question and an answer, and a summary of both."""
    cid = store.create(title=title).id
    question = store.add_message(cid, "user", "Where is Oslo?").id
    answer = store.add_message(cid, "assistant", "In Norway.", parent_id=question).id
    store.add_summary(cid, "Asked about Oslo.", question, answer)
    return cid, question, answer


def test_renames_are_announced_and_a_blank_title_is_refused(app):
    cid, _, _ = _conversation(app.store)
    assert app.edits.rename(cid, "  Norway   notes ") == ConversationRenamed(cid, "Norway notes")
    refused = app.edits.rename(cid, "   ")
    assert isinstance(refused, EditRefused) and refused.action == "rename"
    assert "at least one character" in refused.message
    assert app.store.conversation(cid).title == "Norway notes"  # nothing lost


def test_a_pin_of_an_unknown_message_is_refused_and_changes_nothing(app):
    cid, question, _ = _conversation(app.store)
    assert app.edits.pin(question, True) == MessagePinned(cid, question, True)
    refused = app.edits.pin(999, True)
    assert isinstance(refused, EditRefused) and "999" in refused.message
    assert [m.pinned for m in app.store.path(cid)] == [True, False]


def test_a_summary_rewritten_by_hand_is_announced_and_an_empty_one_refused(app):
    cid, _, _ = _conversation(app.store)
    summary = app.store.summaries(cid)[0]
    assert isinstance(app.edits.edit_summary(summary.id, "  "), EditRefused)
    event = app.edits.edit_summary(summary.id, " Oslo is in Norway. ")
    assert event == SummaryEdited(cid, summary.id, "Oslo is in Norway.")
    assert app.store.summary(summary.id).content == "Oslo is in Norway."


def test_a_bad_import_is_refused_with_the_reason_and_stores_nothing(app, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    refused = app.edits.import_file(bad)
    assert isinstance(refused, EditRefused) and refused.action == "import"
    assert "bad.json" in refused.message
    assert app.store.conversations() == []
    good = tmp_path / "good.json"
    export = {"format": FORMAT, "title": "Imported", "messages": []}
    good.write_text(json.dumps(export), encoding="utf-8")
    made = app.edits.import_file(good)
    assert isinstance(made, ConversationImported) and made.title == "Imported"
    assert [c.title for c in app.store.conversations()] == ["Imported"]


def test_deleting_the_open_conversation_lets_go_of_it_and_its_saved_state(app):
    cid, _, _ = _conversation(app.store)
    app.open_conversation(cid)
    state = app.kv.root / "another-model" / f"conversation-{cid}.kv"  # left by another model
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_bytes(b"saved KV state")
    assert app.delete_conversation(cid) == ConversationDeleted(cid)
    assert app.session is None and not state.exists()
    assert app.store.conversations() == []
    refused = app.delete_conversation(cid)  # gone already: said, not raised
    assert isinstance(refused, EditRefused) and refused.action == "delete"


@pytest.fixture
def window(qtbot, tmp_path):
    """The window over a store with one conversation; no model is loaded (none of
    these changes needs one)."""
    from vllmchat.ui.window.main_window import MainWindow

    store = ConversationStore(tmp_path / "c.sqlite3")
    _conversation(store)
    w = MainWindow(store, AppSettings(), KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()
    assert not w.bridge.busy, "a call was left on the engine's thread"
    store.close()


def test_the_list_renames_and_deletes_through_the_application_layer(qtbot, window, monkeypatch):
    store, listed = window.bridge.app.store, window.conversations
    first = window.conversation_id
    renamed: list[object] = []
    window.bridge.events.conversation_renamed.connect(renamed.append)
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Fjords", True))
    listed.rename_current()
    assert renamed == [ConversationRenamed(first, "Fjords")]
    assert store.conversation(first).title == "Fjords"
    assert listed.list.item(0).text() == "Fjords"
    window.new_conversation()  # nothing is stored until its first message
    assert window.conversation_id is None and listed.list.count() == 1
    second = store.create().id  # as its first message would store it
    listed.refresh()
    window.open_conversation(second)
    assert window.conversation_id == second and listed.list.count() == 2
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    listed.delete_current()  # the open one: after the engine's thread has let go of it
    qtbot.waitUntil(lambda: window.conversation_id == first, timeout=TIMEOUT)
    assert [c.id for c in store.conversations()] == [first]
    assert listed.list.count() == 1 and listed.current_id() == first


def test_pins_and_summary_edits_change_the_view_once_the_store_has_them(qtbot, window, monkeypatch):
    question = next(w for w in window.chat.messages() if w.role == "user")
    assert question.pin_button is not None
    question.pin_button.click()
    assert window.stored.message(question.message_id).pinned
    assert question.pin_button.text() == "Pinned"
    assert "pinned" in window.statusBar().currentMessage()
    summary = next(w for w in window.chat.messages() if w.role == "summary")
    monkeypatch.setattr(QInputDialog, "getMultiLineText", lambda *a, **k: ("Norway.", True))
    window.chat.summary_edit_requested.emit(summary.message_id)  # its Edit button
    assert window.stored.summary(summary.message_id).content == "Norway."
    again = next(w for w in window.chat.messages() if w.role == "summary")
    assert again.text == "Norway."


def test_a_bad_import_is_told_in_a_dialog_and_the_list_keeps_its_conversations(
    qtbot, window, monkeypatch, tmp_path
):
    bad = tmp_path / "notes.json"
    bad.write_bytes(b"\xff\xfe not text")
    warned: list[str] = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(bad), ""))
    monkeypatch.setattr(QMessageBox, "warning", lambda _p, _t, text: warned.append(text))
    window.talk.import_conversation()
    assert len(warned) == 1 and "not UTF-8" in warned[0]
    assert window.conversations.list.count() == 1
