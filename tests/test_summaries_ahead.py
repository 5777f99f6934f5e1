"""Summaries written while the user reads (on the real demo model), and two-part
summaries whose fact list survives: merged across summaries, written by another
engine (a loopback server scripted with fact lists: no model here writes them
reliably), a malformed list falling back to the paragraph."""

from __future__ import annotations

import logging

import pytest

from tests.fake_openai import FakeServer
from vllmchat.core.conversations.events import PrefilledAhead, SummaryEvent
from vllmchat.core.conversations.memory.facts import merge_facts, parse_answer, split_stored
from vllmchat.core.conversations.memory.summarize import answer_complete, new_summary
from vllmchat.core.engine.events import DoneEvent, StatsEvent

TOPICS = ["rivers", "mountains", "lakes", "forests", "deserts", "islands", "glaciers"]


PLANTED = "Our dog is named Bruno and my budget is 4,500 euros."


def _chat_until_due(app, limit: int = 12) -> None:
    """Turns until the next one would summarize (the summary ahead is due); the first
    message plants two facts."""
    from vllmchat.core.conversations.turns.background import summary_due

    session = app.session
    for i, topic in enumerate(TOPICS + TOPICS):
        asked = f"Tell me two facts about {topic}, briefly."
        events = list(app.send(f"{PLANTED} {asked}" if i == 0 else asked))
        assert isinstance(events[-1], DoneEvent), events[-1]
        if summary_due(session, app.store.path(app.conversation_id)):
            return
    pytest.fail("the conversation never came near the threshold")


@pytest.fixture
def app(make_demo_app):
    chat, loaded = make_demo_app(
        n_ctx=1024, max_tokens=48, threshold=0.5, keep_last_turns=1, summary_max_words=40
    )
    assert loaded
    return chat


def test_the_summary_is_written_ahead_and_the_next_turn_prefills_little(app):
    _chat_until_due(app)
    ahead = list(app.reading.prepare_next())
    statuses = [e.status for e in ahead if isinstance(e, SummaryEvent)]
    if "fallback" in statuses:  # the demo model echoed or wrote nothing usable
        pytest.skip(f"the demo model gave no usable summary: {ahead}")
    assert statuses == ["started", "done"]
    prefilled = [e for e in ahead if isinstance(e, PrefilledAhead)]
    assert prefilled and prefilled[0].complete and prefilled[0].prefilled_tokens > 0
    summaries = app.store.summaries(app.conversation_id)
    assert len(summaries) == 1
    system = app.session.plan(app.store.path(app.conversation_id))[0][0]["content"]
    facts = system.split("Facts the user gave, word for word:")[1]
    assert "Bruno" in facts and "4,500" in facts, "the stated facts are in the prompt"
    events = list(app.send("One more question: what is a fjord?"))
    assert not [e for e in events if isinstance(e, SummaryEvent)], "nothing left to do in-turn"
    stats = next(e.stats for e in events if isinstance(e, StatsEvent))
    assert stats.tokens_prefilled < 40, "the prompt the summary made was warm"
    assert app.session.plan(app.store.path(app.conversation_id))[1].summary_id == summaries[0].id


def test_a_turn_sent_during_the_summary_stops_it_and_is_answered(app):
    _chat_until_due(app)
    calls: list[int] = []

    def busy() -> bool:  # the user sends a message just after the summary starts
        calls.append(1)
        return len(calls) > 3

    ahead = list(app.reading.prepare_next(busy=busy))
    assert [e.status for e in ahead if isinstance(e, SummaryEvent)] in (
        ["started", "cancelled"],
        [],
    )
    assert not app.store.summaries(app.conversation_id), "a stopped summary is never stored"
    assert len(calls) <= 12, "checked as tokens come"
    events = list(app.send("Are you there?"))
    assert isinstance(events[-1], DoneEvent), "the turn is answered (summarizing in-turn)"


def test_nothing_is_done_ahead_while_the_context_is_roomy(make_demo_app):
    chat, _ = make_demo_app(n_ctx=2048, max_tokens=24)
    list(chat.send("Hello!"))
    assert list(chat.reading.prepare_next()) == []


FIRST = """Facts:
- sister's name: Ingrid Solberg
- dog's name: Bruno
- trip budget: 4500 euros

Summary: The user introduced family and pets and set a budget."""
SECOND = """Facts:
- trip budget: 5200 euros
- departure: 14 March
- dog's name: a dog

Summary: The budget went up and a date was chosen."""


def test_two_summaries_by_a_summary_server_merge_their_facts(make_demo_app):
    with FakeServer() as server:
        server.mode = "script"
        server.script = [FIRST, SECOND]
        app, _ = make_demo_app(
            n_ctx=2048, max_tokens=24, summary_server=server.url, keep_last_turns=1
        )
        for text in (
            "My sister is Ingrid Solberg and my dog is Bruno.",
            "My budget for the trip is 4500 euros.",
            "Hello again.",
        ):
            list(app.send(text))
        first = [e for e in app.summarize() if isinstance(e, SummaryEvent)]
        assert first[-1].status == "done", first
        for text in ("The budget is now 5200 euros.", "We leave on 14 March.", "Thanks.", "Ok."):
            list(app.send(text))
        second = [e for e in app.summarize() if isinstance(e, SummaryEvent)]
        assert second[-1].status == "done", second
    stored = split_stored(app.store.summaries(app.conversation_id)[-1].content)
    assert stored.facts == (
        "sister's name: Ingrid Solberg",
        "dog's name: Bruno",  # restated without grounding: not replaced
        "trip budget: 5200 euros",  # updated in place
        "departure: 14 March",
    )
    assert stored.narrative.startswith("The budget went up")
    asked = server.requests[1]["messages"][-1]["content"]
    assert "- dog's name: Bruno" in asked, "the known facts were given to the summarizer"
    prompt = app.session.plan(app.store.path(app.conversation_id))[0][0]["content"]
    assert "Ingrid Solberg" in prompt and "5200 euros" in prompt


def test_a_summary_server_that_is_down_falls_back_to_the_loaded_model(make_demo_app):
    app, _ = make_demo_app(
        n_ctx=2048, max_tokens=24, summary_server="http://127.0.0.1:9", keep_last_turns=1
    )
    for text in ("First message.", "Second message.", "Third message."):
        list(app.send(text))
    events = [e for e in app.summarize() if isinstance(e, SummaryEvent)]
    final = events[-1]
    assert final.status in ("done", "fallback")
    if final.status == "done":
        assert "summary server failed" in final.message


def test_a_malformed_fact_list_falls_back_to_the_paragraph_with_the_reason(caplog):
    previous = "Facts:\n- dog's name: Bruno\n\nSummary: Earlier talk."
    with caplog.at_level(logging.WARNING):
        made, reason = new_summary(
            "The user talked about trains and planes.", previous, "trains planes", 40
        )
    assert "malformed" in reason and "malformed" in caplog.text
    assert made.facts == ("dog's name: Bruno",), "old facts are kept"
    assert made.narrative == "The user talked about trains and planes."


def test_fact_lists_parse_merge_and_keep_old_facts_word_for_word():
    parsed = parse_answer("**Facts:**\n1. Name: Ada\n* city: Oslo.\n- none\n\nSummary: Hi.", 40)
    assert parsed.facts == ("Name: Ada", "city: Oslo") and parsed.narrative == "Hi."
    merged = merge_facts(("name: Ada", "pet: cat"), ("Name: Ada Lovelace", "car: red"))
    assert merged == ("Name: Ada Lovelace", "pet: cat", "car: red")
    assert split_stored("An old one-paragraph summary.").narrative.startswith("An old")


def test_a_summary_keeps_the_models_facts_and_leaves_the_users_to_the_fact_list():
    said = "My sister is called Ingrid Solberg. Our dog is named Bruno."
    first, reason = new_summary("Rivers are long.", None, said, 40)
    assert "malformed" in reason and first.facts == (), "the user's words are not copied in"
    second, _ = new_summary("Facts:\n- dog's name: Bruno\n\nSummary: Dogs.", first.text(), said, 40)
    assert second.facts == ("dog's name: Bruno",) and second.narrative == "Dogs."


def test_a_streaming_summary_is_complete_once_what_is_kept_is_written():
    facts = "Facts:\n- dog's name: Bruno\n\nSummary: The user talked about dogs"
    assert not answer_complete(facts, 40), "the narrative is still being written"
    assert answer_complete(facts + ".\n\nUser: and then", 40), "the narrative ended"
    assert answer_complete(facts + " and more" * 30, 40), "past the word cap"
    assert not answer_complete("Here are the two parts:\n\n", 40), "a preamble may precede it"
    assert answer_complete("You are helpful.\n\nWrite two parts.\n\nFacts: a list, one", 40)
