"""The stated-facts rule measured on sentences from real chats (``chat_sentences``):
how many of the facts it keeps, and how many of the requests it takes for facts.

The counts are the ones measured when the rule was committed, held as a floor and a
ceiling so that a change to the rule that loses facts or keeps requests is seen."""

from __future__ import annotations

from collections import Counter

from tests.chat_sentences import DEVELOPMENT, HELD_OUT
from vllmchat.core.conversations.memory.stated import statements


def _kept(rows: list[tuple[str, str, str]]) -> tuple[Counter[str], Counter[str]]:
    """(sentences per label, sentences kept as facts per label)."""
    total: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    for label, _, sentence in rows:
        total[label] += 1
        kept[label] += bool(statements([sentence]))
    return total, kept


def test_the_sets_are_as_drawn():
    for rows in (DEVELOPMENT, HELD_OUT):
        assert len(rows) == 160
        assert Counter(source for _, source, _ in rows) == {"sharegpt": 80, "chitchat": 80}
        assert {label for label, _, _ in rows} == {"F", "R", "Q", "O"}
    assert not {s for *_, s in DEVELOPMENT} & {s for *_, s in HELD_OUT}


def test_requests_that_read_like_statements_are_not_kept_on_the_held_out_part():
    total, kept = _kept(HELD_OUT)
    assert (total["R"], total["F"], total["Q"], total["O"]) == (27, 36, 17, 80)
    assert kept["R"] <= 3, "at most 3 of 27 requests kept (the aim: at most 1 in 5)"
    assert kept["Q"] == 0
    assert kept["F"] >= 25, "at least 25 of 36 facts kept (the aim, 5 in 6, is not met)"


def test_the_development_part_is_kept_as_measured():
    total, kept = _kept(DEVELOPMENT)
    assert (total["R"], total["F"]) == (23, 43)
    assert kept["R"] <= 3
    assert kept["F"] >= 36
