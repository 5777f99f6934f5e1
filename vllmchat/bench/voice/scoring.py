"""Word error rate the way Whisper's papers score it: both texts normalised alike first.

The normaliser forgives what is spelling, not hearing: case and punctuation, "5" and
"five", "it's" and "it is", "blue-fish" and "blue fish", "colour" and "color". What is
left is a word misheard, dropped or invented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vllmchat.core.voice.number_words import number_words

_CONTRACTIONS = {
    r"\bwon't\b": "will not",
    r"\bcan't\b": "can not",
    r"\blet's\b": "let us",
    r"\bain't\b": "is not",
    r"n't\b": " not",
    r"'re\b": " are",
    r"'ll\b": " will",
    r"'ve\b": " have",
    r"'m\b": " am",
    r"'d\b": " would",
    r"\b(it|that|what|there|here|he|she|who|where|how)'s\b": r"\1 is",
}
# British spellings and spelling variants a recogniser may pick either way.
_SPELLINGS = {
    "cannot": "can not",
    "colour": "color",
    "favourite": "favorite",
    "flavour": "flavor",
    "grey": "gray",
    "kilometre": "kilometer",
    "kilometres": "kilometers",
    "litre": "liter",
    "litres": "liters",
    "metre": "meter",
    "metres": "meters",
    "centimetres": "centimeters",
    "millimetres": "millimeters",
    "millilitres": "milliliters",
    "organise": "organize",
    "recognise": "recognize",
    "summarise": "summarize",
    "travelling": "traveling",
    "tyre": "tire",
    "tyres": "tires",
    "smokey": "smoky",
    "ok": "okay",
    "mr": "mister",
    "mrs": "missus",
    "dr": "doctor",
}
_MONEY = re.compile(r"\$(\d+)")


def normalized_words(text: str) -> list[str]:
    """``text`` as lower-case words: numbers in words, contractions and hyphens undone."""
    text = text.lower().replace("’", "'")
    text = _MONEY.sub(r"\1 dollars", text)
    text = re.sub(r"(\d),(\d)", r"\1\2", text)
    text = re.sub(r"\d+", lambda m: f" {number_words(int(m.group(0)))} ", text)
    for pattern, words in _CONTRACTIONS.items():
        text = re.sub(pattern, words, text)
    text = re.sub(r"[^a-z' ]+", " ", text.replace("-", " "))
    stripped = [word.strip("'") for word in text.split()]
    spelt = " ".join(_SPELLINGS.get(word, word) for word in stripped if word)
    return spelt.split()


def word_errors(said: str, heard: str) -> int:
    """Substitutions, insertions and deletions between the words said and heard."""
    ref, hyp = normalized_words(said), normalized_words(heard)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, got in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != got))
    return row[-1]


@dataclass(frozen=True)
class Scored:
    """A set of sentences heard back: its word error rate and its worst sentences."""

    errors: int
    words: int
    worst: tuple[tuple[int, str, str], ...]  # (errors, said, heard), most errors first

    @property
    def wer(self) -> float:
        return round(self.errors / max(1, self.words), 4)


def scored(said: tuple[str, ...], heard: list[str], *, worst: int = 5) -> Scored:
    """The word errors of each sentence said against what was heard."""
    counts = [word_errors(s, h) for s, h in zip(said, heard, strict=True)]
    words = sum(len(normalized_words(s)) for s in said)
    ranked = sorted(
        ((n, s, h) for n, s, h in zip(counts, said, heard, strict=True) if n),
        key=lambda row: -row[0],
    )
    return Scored(sum(counts), words, tuple(ranked[:worst]))


def pooled(parts: list[Scored]) -> float:
    """The word error rate of several sets taken together (weighted by their words)."""
    return round(sum(p.errors for p in parts) / max(1, sum(p.words for p in parts)), 4)
