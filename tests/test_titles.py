"""Conversation titles made by the model, in the background of the first reply."""

from __future__ import annotations

import pytest

from vllmchat.core.app.events import TitleMade
from vllmchat.core.conversations.turns.titles import clean_title
from vllmchat.core.engine.events import DoneEvent, StatsEvent


def test_titles_are_cleaned_to_a_few_words():
    assert clean_title('Title: "The Capital of France."\nMore text') == "The Capital of France"
    assert clean_title("  **Paris Travel Tips**  ") == "Paris Travel Tips"
    assert clean_title("one two three four five six seven eight") == "one two three four five six"
    assert clean_title("\n\n") == "" and clean_title('"."') == ""


@pytest.fixture
def app(make_demo_app):
    chat, loaded = make_demo_app(n_ctx=2048, max_tokens=24)
    assert loaded
    return chat


def test_the_model_names_the_conversation_without_costing_the_next_turn(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("What is the capital of France?"))
    before = app.store.conversation(app.conversation_id).title
    assert before.startswith("What is the capital")  # the first words, at once
    made = list(app.make_title())
    assert len(made) == 1 and isinstance(made[0], TitleMade) and made[0].by_model
    title = app.store.conversation(app.conversation_id).title
    assert title == made[0].title and title != before and 1 <= len(title.split()) <= 6
    stats = next(e.stats for e in app.send("And of Italy?") if isinstance(e, StatsEvent))
    assert stats.tokens_prefilled < 40, "the title request shared the conversation's prefix"
    again = list(app.make_title())
    assert not again[0].by_model and again[0].title == title, "named once"


def test_a_busy_model_keeps_the_first_words_and_a_user_title_is_kept(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("Tell me about tea."))
    made = list(app.make_title(busy=lambda: True))
    assert not made[0].by_model and made[0].title.startswith("Tell me about tea")
    app.store.rename(app.conversation_id, "My tea notes")
    assert not next(iter(app.make_title())).by_model
    assert app.store.conversation(app.conversation_id).title == "My tea notes"


def test_a_title_gives_way_to_a_turn_that_comes_while_it_is_made(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("Tell me about coffee."))
    calls = []

    def busy() -> bool:  # a message is sent just after the title request starts
        calls.append(1)
        return len(calls) > 1

    made = list(app.make_title(busy=busy))
    assert not made[0].by_model and made[0].title.startswith("Tell me about coffee")
    assert len(calls) <= 8, "checked as tokens come, stopped within a few"
    assert any(isinstance(e, DoneEvent) for e in app.send("And tea?"))
