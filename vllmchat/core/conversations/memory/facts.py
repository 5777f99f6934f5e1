"""Two-part summaries: a list of facts, merged across summaries, and a short narrative.

A stored summary is plain text, so any engine can write it and the user can edit it:

    Facts:
    - dog's name: Rex
    - deadline: 14 March

    Summary: The user planned a trip …

A later summary adds facts and updates those whose topic (the text before the
colon) it states again; every other old fact is kept word for word, so facts are
never paraphrased away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FACTS_HEADER = re.compile(
    r"^\s*(?:#+\s*|\*\*)?(?:key\s+)?facts?(?:\*\*)?\s*:?\s*(?:\*\*)?\s*$", re.I
)
SUMMARY_HEADER = re.compile(
    r"^\s*(?:#+\s*|\*\*)?(?:summary|narrative)(?:\*\*)?\s*:\s*(?:\*\*)?\s*", re.I
)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
_EMPTY_FACTS = {"none", "n/a", "no facts", "nothing", "-"}
MAX_FACTS = 40
MAX_FACT_CHARS = 200
MAX_LIST_CHARS = 2400  # about 600 tokens: the newest facts are kept within it


@dataclass(frozen=True)
class TwoPartSummary:
    """Facts (one line each) and a narrative paragraph."""

    facts: tuple[str, ...]
    narrative: str

    def text(self) -> str:
        """The stored form (what the prompt shows and the user edits)."""
        parts = []
        if self.facts:
            parts.append("Facts:\n" + "\n".join(f"- {f}" for f in self.facts))
        if self.narrative:
            parts.append(f"Summary: {self.narrative}")
        return "\n\n".join(parts)


class MalformedSummary(ValueError):
    """The model's answer has no fact list this parser can read."""


def topic(fact: str) -> str:
    """What a fact is about: the text before its colon, normalised; else the fact."""
    head = fact.split(":", 1)[0] if ":" in fact else fact
    return " ".join(re.sub(r"[^\w\s']", " ", head.lower()).split())


def split_stored(text: str) -> TwoPartSummary:
    """A stored summary's parts; an old one-paragraph summary is all narrative."""
    facts: list[str] = []
    narrative: list[str] = []
    section = ""
    for line in text.splitlines():
        if FACTS_HEADER.match(line):
            section = "facts"
            continue
        head = SUMMARY_HEADER.match(line)
        if head:
            section = "summary"
            line = line[head.end() :]
        bullet = _BULLET.match(line)
        if section == "facts" and bullet:
            facts.append(bullet.group(1))
        elif line.strip() and section != "facts":
            narrative.append(line.strip())
        elif line.strip():  # free text in the facts section: still a fact
            facts.append(line.strip())
    return TwoPartSummary(tuple(facts), " ".join(narrative))


def parse_answer(text: str, max_words: int) -> TwoPartSummary:
    """The model's two parts; ``MalformedSummary`` (with the reason) when it gave no
    readable fact list."""
    text = text.strip()
    if not any(FACTS_HEADER.match(line) for line in text.splitlines()):
        raise MalformedSummary("the answer has no 'Facts:' list")
    parsed = split_stored(text)
    facts = [f for f in (_clean_fact(f) for f in parsed.facts) if f]
    if not facts and not parsed.narrative:
        raise MalformedSummary("the answer's fact list and summary are empty")
    words = parsed.narrative.split()
    narrative = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
    return TwoPartSummary(tuple(facts), narrative)


def _clean_fact(fact: str) -> str:
    fact = " ".join(fact.replace("**", "").split()).rstrip(".;")
    if fact.lower() in _EMPTY_FACTS or len(fact) < 3:
        return ""
    return fact[:MAX_FACT_CHARS]


def merge_facts(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    """``old`` with ``new`` added: a new fact on an old topic replaces it in place, an
    exact repeat is dropped, the rest of ``old`` stays word for word."""
    merged = list(old)
    index = {topic(f): i for i, f in enumerate(merged)}
    for fact in new:
        key = topic(fact)
        if key in index:
            merged[index[key]] = fact
        elif fact not in merged:
            index[key] = len(merged)
            merged.append(fact)
    return bounded(tuple(merged))


def bounded(facts: tuple[str, ...]) -> tuple[str, ...]:
    """The newest facts within ``MAX_FACTS`` and ``MAX_LIST_CHARS``."""
    kept: list[str] = []
    size = 0
    for fact in reversed(facts[-MAX_FACTS:]):
        size += len(fact) + 3
        if size > MAX_LIST_CHARS:
            break
        kept.append(fact)
    return tuple(reversed(kept))
