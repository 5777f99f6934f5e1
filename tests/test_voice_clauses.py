"""Where a sentence is cut for the voice: at its punctuation, and a reply's first words sooner."""

from __future__ import annotations

from vllmchat.core.voice.speaker import FIRST_CLAUSE, clauses_of

SEA = "The sea is a vast body of salt water that covers most of the surface of the Earth."


def test_a_long_first_clause_is_cut_before_a_joining_word_only_at_a_replys_start() -> None:
    assert clauses_of(SEA, first=FIRST_CLAUSE) == [
        "The sea is a vast body of salt water",
        "that covers most of the surface of the Earth.",
    ]
    assert clauses_of(SEA) == [SEA]  # later sentences keep their clauses whole


def test_punctuation_cuts_first_and_no_piece_is_left_too_short() -> None:
    paris = "The capital of France is Paris, a city known for its art and food."
    assert clauses_of(paris, first=FIRST_CLAUSE) == [
        "The capital of France is Paris,",
        "a city known for its art and food.",
    ]
    assert clauses_of(paris) == [paris]  # a later clause is at least MIN_CLAUSE long
    short_tail = "Here are five short sentences about the sea and its creatures."
    assert clauses_of(short_tail, first=FIRST_CLAUSE) == [short_tail]
    assert clauses_of("Hello there.", first=FIRST_CLAUSE) == ["Hello there."]
