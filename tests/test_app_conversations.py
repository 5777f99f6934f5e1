"""The application layer owns the stored conversations: front ends read frozen values
through ``app.conversations`` and change them through its intents, each answered by an
event that every listener hears. A new chat is stored only at its first message. Real
store; the pending chat's turn runs on the real demo model."""

from __future__ import annotations

import dataclasses

import pytest

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    AttachmentRemoved,
    ConversationCreated,
    ConversationDeleted,
    ConversationOpened,
    ConversationRenamed,
    EditRefused,
    MessagePinned,
    NewChatPending,
)
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.attachments.model import ExtractedDocument
from vllmchat.core.conversations.events import FactsChanged, MessageStored
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent


class _NoEngine:
    """An engine that was never started (the store's intents need none)."""

    info = None
    alive = False
    pid = None

    def close(self) -> None:
        pass


@pytest.fixture
def app(tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    chat = ChatApp(store, KVStateCache(tmp_path / "kv"), engine=_NoEngine())  # type: ignore[arg-type]
    yield chat
    store.close()


def _chat(store: ConversationStore) -> tuple[int, int, int]:
    cid = store.create(title="Trip").id
    question = store.add_message(cid, "user", "My name is Ada. Where is Oslo?").id
    answer = store.add_message(cid, "assistant", "In Norway.", parent_id=question).id
    return cid, question, answer


def test_queries_hand_out_values_and_unknown_ids_are_none(app):
    cid, question, answer = _chat(app.store)
    conversations = app.conversations
    assert [c.id for c in conversations.list()] == [cid]
    assert conversations.conversation(cid).title == "Trip"
    assert conversations.conversation(999) is None
    assert [m.id for m in conversations.messages(cid)] == [question, answer]
    assert [m.id for m in conversations.branch(cid)] == [question, answer]
    assert conversations.messages(999) == ()
    assert conversations.message(answer).content == "In Norway."
    assert conversations.message(999) is None
    hits = conversations.search("Oslo")
    assert [(h.conversation.id, h.message.id) for h in hits] == [(cid, question)]
    assert "[Oslo]" in hits[0].snippet
    assert [f.text for f in conversations.facts(cid)] == ["My name is Ada"]
    assert conversations.facts(999) == ()
    assert conversations.tool_steps([question, answer]) == {}
    assert conversations.pending_attachments(cid) == ()
    assert conversations.current_summary(cid) is None


def test_every_write_is_an_intent_answered_by_an_event_all_listeners_hear(app):
    cid, question, _ = _chat(app.store)
    heard: list[object] = []
    unsubscribe = app.conversations.subscribe(heard.append)
    conversations = app.conversations

    assert conversations.rename(cid, " Oslo ") == ConversationRenamed(cid, "Oslo")
    assert conversations.pin(question, True) == MessagePinned(cid, question, True)
    added = conversations.add_fact(cid, "I live in Bergen.")
    assert isinstance(added, FactsChanged)
    assert [f.text for f in added.facts] == ["My name is Ada", "I live in Bergen."]
    again = conversations.add_fact(cid, "I live in Bergen.")
    assert isinstance(again, EditRefused) and "already" in again.message
    fact = added.facts[1]
    edited = conversations.edit_fact(fact.id, "I live in Oslo.")
    assert isinstance(edited, FactsChanged) and "I live in Oslo." in [f.text for f in edited.facts]
    deleted = conversations.delete_fact(fact.id)
    assert isinstance(deleted, FactsChanged)
    assert [f.text for f in deleted.facts] == ["My name is Ada"]
    assert isinstance(conversations.delete_fact(fact.id), EditRefused)

    assert heard[:2] == [ConversationRenamed(cid, "Oslo"), MessagePinned(cid, question, True)]
    assert heard[2:] == [added, edited, deleted]  # refusals are answered, not told
    unsubscribe()
    conversations.rename(cid, "Norway")
    assert len(heard) == 5


def test_an_attachment_not_sent_is_taken_back_and_one_sent_stays(app):
    cid, question, _ = _chat(app.store)
    text = "Oslo is in Norway."
    doc = ExtractedDocument("a.txt", "0" * 64, "text/plain", len(text), text, ())
    waiting = app.attachments.add_document(cid, doc, tokens=5, mode="whole", chunks=())
    sent = app.attachments.add_document(
        cid, doc, tokens=5, mode="whole", chunks=(), message_id=question
    )
    assert [a.id for a in app.conversations.pending_attachments(cid)] == [waiting.id]
    assert [a.id for a in app.conversations.attachments_of([question])[question]] == [sent.id]
    assert app.conversations.detach(waiting.id) == AttachmentRemoved(waiting.id)
    refused = app.conversations.detach(sent.id)
    assert isinstance(refused, EditRefused) and "stays" in refused.message
    assert app.conversations.attachment(sent.id) is not None


def test_deleting_the_open_conversation_lets_go_of_it(app):
    cid, _, _ = _chat(app.store)
    app.open_conversation(cid)
    assert app.conversations.delete(cid) == ConversationDeleted(cid)
    assert app.session is None and app.conversations.list() == ()
    assert isinstance(app.conversations.delete(cid), EditRefused)


def test_a_new_chat_is_stored_only_at_its_first_message(tmp_path, demo_model):
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"))
    try:
        settings = AppSettings.of(model_path=str(demo_model), n_threads=2, temperature=0.0)
        list(app.load(settings))
        assert app.new_chat(system_prompt="Be brief.") == NewChatPending("Be brief.")
        assert app.conversation_id is None and store.conversations() == []

        events = list(app.send("Hello"))
        created = events[0]
        assert isinstance(created, ConversationCreated)
        assert events[1] == ConversationOpened(created.conversation_id, 0)
        assert any(isinstance(e, DoneEvent) for e in events)
        assert [e.role for e in events if isinstance(e, MessageStored)] == ["user", "assistant"]
        assert app.conversation_id == created.conversation_id
        assert store.conversation(created.conversation_id).system_prompt == "Be brief."
        assert app.pending is None and len(store.conversations()) == 1
    finally:
        app.shutdown()
        store.close()


def test_the_session_is_configured_by_one_value_that_a_change_replaces(app):
    cid, _, _ = _chat(app.store)
    app.open_conversation(cid)
    before = app.session.config
    assert before.sampling == app.settings.sampler and before.tool_stream is None
    list(app.configure(max_tokens=7, keep_last_turns=3))
    after = app.session.config
    assert after is not before and before.sampling.max_tokens != 7  # a new value
    assert (after.sampling.max_tokens, after.policy.keep_last_turns) == (7, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.model_name = "x"  # type: ignore[misc]
