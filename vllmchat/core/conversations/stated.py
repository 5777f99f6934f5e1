"""Facts the user stated, kept word for word whatever the summarizing model writes.

A small model often writes no readable fact list, or one that misses a name or a
number. So the user's own statements that carry a specific (a number, a name, a
preference, a decision) are taken from the messages being summarized, and each
one the model's fact list does not already cover joins the list verbatim. A later
statement of the same shape ("My budget is 5,200 euros" after "My budget is
4,500 euros") replaces the earlier one: only what the user contradicts is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[\w][\w'’,.-]*\w|\w")
_NUMBER = re.compile(r"\d")
# Requests and questions are not statements of fact.


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_A_STATEMENT = _words(
    "write explain tell describe give list show summarize summarise translate make create "
    "draft compose generate help please can could would will what how why when where who "
    "which is are do does did should let continue try thanks thank hello hi ok okay"
)
_FIRST_PERSON = _words("i i'm i’m my we we're our me us mine")
_SALIENT_VERBS = re.compile(
    r"\b(prefer\w*|like|love|hate|favou?rite|allergic|decided|decide|chose|choose|want|"
    r"need|must|plan\w*|named|called|name|live|work|deadline|remember|birthday|born)\b",
    re.IGNORECASE,
)
_STOP = _words(
    "the a an and or of to in on at for is are was were be been my our i we me us it this "
    "that with by as from now also"
)
MAX_WORDS, MIN_WORDS = 30, 3
MAX_MESSAGE_CHARS = 1200  # a longer message is material (a document, code), not a statement


def _specifics(sentence: str) -> list[str]:
    """Numbers and names: words with a digit, and capitalised words after the first."""
    words = _WORD.findall(sentence)
    found = [w for w in words if _NUMBER.search(w)]
    found += [w for w in words[1:] if w[:1].isupper() and w not in ("I", "I'm", "I’m")]
    return found


def is_statement(sentence: str) -> bool:
    """Whether a sentence states something worth keeping (not a request or question)."""
    words = _WORD.findall(sentence)
    if not MIN_WORDS <= len(words) <= MAX_WORDS or sentence.rstrip().endswith("?"):
        return False
    if words[0].lower() in _NOT_A_STATEMENT:
        return False
    personal = any(w.lower() in _FIRST_PERSON for w in words)
    return bool(_specifics(sentence)) or (personal and bool(_SALIENT_VERBS.search(sentence)))


def statements(texts: Iterable[str]) -> list[str]:
    """The user's statements of fact in ``texts``, in order, without repeats (none from
    long messages or code: pasted material is the model's to summarize)."""
    found: list[str] = []
    for text in texts:
        if len(text) > MAX_MESSAGE_CHARS or "```" in text:
            continue
        for part in _SENTENCE_END.split(text):
            sentence = " ".join(part.split()).rstrip(".;!")
            if is_statement(sentence) and sentence not in found:
                found.append(sentence)
    return found


def _frame(sentence: str) -> set[str]:
    """A statement's shape: its words less the specifics and filler."""
    specific = {w.lower() for w in _specifics(sentence)}
    words = {w.lower() for w in _WORD.findall(sentence)}
    return words - specific - _STOP


def same_subject(a: str, b: str) -> bool:
    """Whether two statements say something about the same thing (``b`` updates ``a``)."""
    fa, fb = _frame(a), _frame(b)
    if not fa or not fb or _specifics(a) == _specifics(b):
        return False
    return len(fa & fb) / len(fa | fb) >= 0.6


def covered(sentence: str, facts_text: str) -> bool:
    """Whether ``facts_text`` already holds what ``sentence`` states."""
    text = facts_text.lower()
    specifics = _specifics(sentence)
    if specifics:
        return all(w.lower().strip(",.") in text for w in specifics)
    words = [w.lower() for w in _WORD.findall(sentence) if w.lower() not in _STOP]
    return bool(words) and sum(w in text for w in words) * 2 >= len(words)


def latest_per_subject(stated: Sequence[str]) -> list[str]:
    """``stated`` less each statement that a later one on the same subject updates."""
    return [s for i, s in enumerate(stated) if not any(same_subject(s, t) for t in stated[i + 1 :])]


def _said_later(fact: str, stated: list[str], after: int) -> bool:
    """Whether the user stated ``fact``'s names and numbers after statement ``after``."""
    specifics = [w.lower() for w in _specifics(fact)]
    return bool(specifics) and any(
        all(w in t.lower() for w in specifics) for t in stated[after + 1 :]
    )


def add_statements(
    facts: tuple[str, ...], stated: Sequence[str], fresh: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """``facts`` with each statement they do not cover: in place of an earlier fact on
    the same subject, else at the end. A ``fresh`` fact (written from these same
    messages) gives way only to a statement made after the one it restates."""
    merged = list(facts)
    latest = latest_per_subject(stated)
    for i, sentence in enumerate(latest):
        if covered(sentence, "\n".join(merged)):
            continue
        earlier = next((j for j, f in enumerate(merged) if same_subject(f, sentence)), None)
        if earlier is None:
            merged.append(sentence)
        elif not (merged[earlier] in fresh and _said_later(merged[earlier], latest, i)):
            merged[earlier] = sentence
    return tuple(merged)
