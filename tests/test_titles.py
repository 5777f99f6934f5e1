"""Conversation titles made by the model, in the background of the first reply."""

from __future__ import annotations

import pytest

from vllmchat.core.app.events import TitleMade
from vllmchat.core.conversations.turns.titles import (
    MAX_WORDS,
    TITLE_PROMPT,
    checked_title,
    clean_title,
    fallback_title,
    refusal,
)
from vllmchat.core.engine.events import DoneEvent, StatsEvent


def test_titles_are_cleaned_to_a_few_words():
    assert clean_title('Title: "The Capital of France."\nMore text') == "The Capital of France"
    assert clean_title("  **Paris Travel Tips**  ") == "Paris Travel Tips"
    assert clean_title("alpha beta gamma delta epsilon zeta eta theta") != ""  # eight words
    assert clean_title("alpha beta gamma delta epsilon zeta eta theta iota") == ""  # nine
    assert clean_title("\n\n") == "" and clean_title('"."') == ""


def test_a_reply_that_is_not_a_title_is_refused():
    # what a small model answered in place of a title
    assert refusal("Here's a two-to-six-word version of the") == "repeats the instruction"
    assert refusal("Here's a conversation with a short") == "repeats the instruction"
    assert refusal("Short Conversation Title") == "repeats the instruction"
    assert refusal("Hello! How can I help you today?") == "a greeting"
    assert refusal("Sure, I can help with that") == "a sentence"
    assert refusal("The capital of France is Paris.") == "a sentence"
    assert refusal("Paris is lovely. So is Rome") == "a sentence"
    assert refusal("Planning a trip to the") == "a sentence"  # cut off
    assert refusal("Ich möchte mit dem Zug nach Berlin fahren.") == "a sentence"
    assert refusal("L'Étoile, la Marseillaise, la femme,") == "a sentence"  # cut off
    assert refusal('Hacer "morning" in Spanish is "morir" (to die') == "a sentence"
    assert refusal("The City of Light, the City of Light") == "repeats itself"
    assert refusal("Why is the sky blue") == ""
    assert refusal("") == "empty" and refusal("  ") == "empty"
    assert refusal("Capital of France") == "" and refusal("Python String Reversal") == ""
    # the user's own words are not the instruction's
    assert refusal("Short story ideas", "Give me ideas for a short story") == ""


def test_a_refused_title_falls_back_to_the_first_words_cut_at_a_word():
    message = "Ich möchte morgen mit dem Zug nach Berlin fahren."
    assert fallback_title(message) == "Ich möchte morgen mit dem Zug…"
    assert fallback_title("Photosynthesis") == "Photosynthesis"
    assert fallback_title("**Bold** start\n```py\nprint(1)\n```") == "Bold start"
    long = "Pneumonoultramicroscopicsilicovolcanoconiosis explained simply for a child"
    assert fallback_title(long) == "Pneumonoultramicroscopicsilicovolcanoconiosis…"
    assert fallback_title("") == ""
    assert checked_title("Here's a short title", message) == "Ich möchte morgen mit dem Zug…"
    assert checked_title("Train to Berlin", message) == "Train to Berlin"


@pytest.fixture
def app(make_demo_app):
    chat, loaded = make_demo_app(n_ctx=2048, max_tokens=24)
    assert loaded
    return chat


def test_the_model_names_the_conversation_without_costing_the_next_turn(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("What is the capital of France?"))
    before = app.store.conversation(app.conversation_id).title
    assert before.startswith("What is the capital")  # the first words, at once
    made = list(app.reading.make_title())
    assert len(made) == 1 and isinstance(made[0], TitleMade)
    title = app.store.conversation(app.conversation_id).title
    assert title == made[0].title and 1 <= len(title.split()) <= MAX_WORDS
    if made[0].by_model:  # a title that passed the check, or the first words
        assert title != before and not refusal(title, "What is the capital of France?")
    else:
        assert title.startswith("What is the capital")
    stats = next(e.stats for e in app.send("And of Italy?") if isinstance(e, StatsEvent))
    assert stats.tokens_prefilled < 40, "the title request shared the conversation's prefix"
    again = list(app.reading.make_title())
    assert not again[0].by_model and again[0].title == title, "named once"


def test_a_busy_model_keeps_the_first_words_and_a_user_title_is_kept(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("Tell me about tea."))
    made = list(app.reading.make_title(busy=lambda: True))
    assert not made[0].by_model and made[0].title.startswith("Tell me about tea")
    app.store.rename(app.conversation_id, "My tea notes")
    assert not next(iter(app.reading.make_title())).by_model
    assert app.store.conversation(app.conversation_id).title == "My tea notes"


def test_a_title_gives_way_to_a_turn_that_comes_while_it_is_made(app):
    assert any(isinstance(e, DoneEvent) for e in app.send("Tell me about coffee."))
    calls = []

    def busy() -> bool:  # a message is sent just after the title request starts
        calls.append(1)
        return len(calls) > 1

    made = list(app.reading.make_title(busy=busy))
    assert not made[0].by_model and made[0].title.startswith("Tell me about coffee")
    assert len(calls) <= 8, "checked as tokens come, stopped within a few"
    assert any(isinstance(e, DoneEvent) for e in app.send("And tea?"))


FIRST_MESSAGES = [
    "What is the capital of France?",  # a question
    "Write a Python function that reverses a string.",  # a request for code
    "Hello!",  # a greeting
    "Ich möchte morgen mit dem Zug nach Berlin fahren.",  # a German sentence
    "Photosynthesis",  # a single word
    "My laptop will not turn on after the update, what should I do?",  # a problem
    "Give me three ideas for a birthday party for a ten-year-old.",  # a list asked for
    "Translate 'good morning' into Spanish.",  # a translation
    "2 + 2 * 3 = ?",  # arithmetic
    "Summarize the plot of Romeo and Juliet in two sentences.",  # a summary
]
PLAIN_WORDS = {"a", "of", "to", "the", "with", "no", "at", "this", "only", "end"}
INSTRUCTION_WORDS = {w.strip(".,").lower() for w in TITLE_PROMPT.split()} - PLAIN_WORDS


def test_ten_first_messages_give_ten_titles_on_the_demo_model(app):
    titles = []
    for message in FIRST_MESSAGES:
        app.open_conversation(app.store.create().id)
        assert any(isinstance(e, DoneEvent) for e in app.send(message))
        [made] = app.reading.make_title(after_first_reply=True)
        assert made.title == app.store.conversation(app.conversation_id).title
        titles.append(made.title)
    for message, title in zip(FIRST_MESSAGES, titles, strict=True):
        echoed = {w.strip(".,?!'").lower() for w in title.split()} & INSTRUCTION_WORDS
        assert not echoed - {w.strip(".,?!'").lower() for w in message.split()}, title
        assert title.strip() and title != "New chat", (message, title)
        assert not refusal(title, message) or title.startswith(fallback_title(message)[:10])
