"""The application layer's title for every front end, on the demo model: the model's
answer where it is a title, else the first message's words; the user's title stays."""

from __future__ import annotations

import pytest

from vllmchat.core.app.conversations.titling import title_conversation
from vllmchat.core.conversations.turns.titles import TITLE_PROMPT, fallback_title, refusal
from vllmchat.core.engine.events import DoneEvent

INSTRUCTION = {w.strip(".,").lower() for w in TITLE_PROMPT.split()} - {"a", "of", "to", "the"}


@pytest.fixture
def app(make_demo_app):
    chat, loaded = make_demo_app(n_ctx=2048, max_tokens=24)
    assert loaded
    return chat


def _title(app) -> str:
    return app.store.conversation(app.conversation_id).title


@pytest.mark.parametrize(
    "message", ["Hello!", "Photosynthesis", "Write a Python function that reverses a string."]
)
def test_a_conversation_is_named_by_a_title_or_its_first_words(app, message):
    assert any(isinstance(e, DoneEvent) for e in app.send(message))
    titled = title_conversation(app.session)
    assert titled.title == _title(app) and titled.title not in ("", "New chat")
    if titled.by_model:
        assert not refusal(titled.title, message)
    else:
        assert titled.title == fallback_title(message)
    words = {w.strip(".,?!'").lower() for w in titled.title.split()}
    assert not (words & INSTRUCTION) - {w.strip(".,?!'").lower() for w in message.split()}


def test_the_user_s_title_stays_even_when_given_while_the_model_answers(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("Tell me about tea."))
    renamed = []

    def rename_once() -> bool:  # the user renames just as the model starts
        if not renamed:
            app.store.rename(app.conversation_id, "My tea notes")
            renamed.append(1)
        return False

    titled = title_conversation(app.session, rename_once)
    assert titled.title == "My tea notes" and not titled.by_model
    assert _title(app) == "My tea notes"
    assert title_conversation(app.session).title == "My tea notes"  # asked again: kept


def test_a_waiting_turn_leaves_the_first_words(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("Tell me about coffee."))
    before = _title(app)
    titled = title_conversation(app.session, lambda: True)
    assert titled.title == before == _title(app) and not titled.by_model
