"""Conversation titles made by the loaded model: asked after the first reply with the
conversation as the prompt's prefix (so the engine's KV cache is reused), and checked
before they are kept. A reply that repeats the instruction, is empty, or is not a title
(a sentence, a greeting, more than ``MAX_WORDS`` words) is refused, and the first words
of the first message name the conversation instead."""

from __future__ import annotations

import itertools
import re

TITLE_PROMPT = (
    "Give this conversation a short title of two to six words. "
    "Reply with the title only, no quotes, no punctuation at the end."
)
MAX_WORDS = 8  # longer is a sentence, not a title
MAX_CHARS = 60
SENTENCE_WORDS = 5  # more, and a full stop at the end: a sentence
FALLBACK_WORDS = 6  # the first words of the first message, where the model gave no title
FALLBACK_CHARS = 48


def _listed(words: str) -> tuple[str, ...]:
    """Words (or phrases) written between bars."""
    return tuple(words.split("|"))


_STOPWORDS = frozenset(
    _listed(
        "a|an|and|are|as|at|be|but|by|for|from|in|into|is|it|its|my|no|not|of|on|or|our|so|that|"
        "the|their|this|to|was|were|what|when|where|which|who|why|with|you|your"
    )
)
_INSTRUCTION_WORDS = frozenset(
    {"title", "titles", "conversation", "conversations", "short", "version"}
    | {"two", "six", "word", "words", "reply", "quote", "quotes", "punctuation"}
)
"""The words of ``TITLE_PROMPT`` (and of the ways a small model restates it): a title
holding one that the user did not write repeats the instruction."""
_OPENERS = _listed(
    "here|heres|sure|okay|ok|certainly|of course|absolutely|i|im|id|ill|ive|as an|let me|"
    "lets|you|your|this is|it is|its|the following|based on|in this|we|my|please|note"
)
_GREETINGS = _listed(
    "hello|hi|hey|greetings|welcome|good morning|good afternoon|good evening|thanks|"
    "thank you|dear|hallo|hola|bonjour|howdy"
)
_DANGLING = _STOPWORDS | {"about", "like", "than", "then", "if", "because", "some", "very"}
"""A last word that leaves the phrase unfinished: a sentence cut by the token limit."""
_VERBS = frozenset(
    _listed("is|are|was|were|be|been|am|will|would|can|could|should|has|have|had|do|does|did")
)
"""Words that make a phrase a sentence (unless it asks a question)."""
_QUESTIONS = frozenset(_listed("what|how|why|who|when|where|which|can|is|are|do|does|should"))


def _words(text: str) -> list[str]:
    """The words of ``text``, lower case, apostrophes dropped (``here's`` is ``heres``)."""
    return re.findall(r"[^\W_]+(?:-[^\W_]+)*", text.lower().replace("'", "").replace("’", ""))


def _starts_with(words: list[str], phrases: tuple[str, ...]) -> bool:
    return any(words[: len(p.split())] == p.split() for p in phrases)


def _unfinished(title: str) -> bool:
    """A phrase the token limit cut: a comma or a colon at its end, a bracket or a
    quote left open."""
    text = title.strip()
    if text.endswith((",", ":", ";", "-", "—", "(")):
        return True
    brackets = (("(", ")"), ("[", "]"), ("“", "”"))
    return any(text.count(a) != text.count(b) for a, b in brackets) or text.count('"') % 2 == 1


def refusal(title: str, first_message: str = "") -> str:
    """Why ``title`` is not a title for a conversation that began with ``first_message``
    ("" when it is one): empty, too long, the instruction's words, a greeting, a
    sentence (or one cut short), words said twice."""
    words = _words(title)
    if not words:
        return "empty"
    if len(words) > MAX_WORDS or len(title) > MAX_CHARS:
        return "too long"
    parts = {p for w in words for p in (w, *w.split("-"))}
    if (parts & _INSTRUCTION_WORDS) - set(_words(first_message)):
        return "repeats the instruction"
    if _starts_with(words, _GREETINGS):
        return "a greeting"
    if _starts_with(words, _OPENERS) or words[-1] in _DANGLING or _unfinished(title):
        return "a sentence"
    if set(words[1:]) & _VERBS and words[0] not in _QUESTIONS:
        return "a sentence"  # "Hacer morning in Spanish is morir"; "Why is the sky blue" is a title
    if re.search(r"[.!?;]\s+\S", title):
        return "a sentence"  # more than one
    pairs = list(itertools.pairwise(words))
    if len(set(pairs)) < len(pairs):
        return "repeats itself"
    if title.rstrip().endswith((".", "!")) and len(words) > SENTENCE_WORDS:
        return "a sentence"
    return ""


def clean_title(text: str, first_message: str = "") -> str:
    """The model's title in ``text`` (its first line, unquoted, without a "Title:"
    prefix or the punctuation at its end), or "" when that is not a title; see
    ``refusal``. ``first_message``: the words the user wrote may be repeated."""
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^(title|conversation title)\s*[:\-]\s*", "", line, flags=re.IGNORECASE)
    line = line.strip(" \t\"'`*#“”‘’")
    if len(line) < 2 or refusal(line, first_message):
        return ""
    return " ".join(line.rstrip(".!?:;,").split())


def fallback_title(first_message: str) -> str:
    """A title made from the first message: its first words, cut at a word boundary
    ("…" where cut); "" when it has no words (an image alone)."""
    text = re.sub(r"```.*?(```|$)", " ", first_message, flags=re.DOTALL)  # code blocks
    words = [w.strip('*_`#>"“”') for w in text.split()]
    words = [w for w in words if w]
    title = ""
    for word in words[:FALLBACK_WORDS]:
        longer = f"{title} {word}".strip()
        if len(longer) > FALLBACK_CHARS:
            break
        title = longer
    if not title and words:
        title = words[0][:FALLBACK_CHARS]
    cut = len(title.split()) < len(words)
    return title.rstrip(",;:") + "…" if cut else title


def checked_title(reply: str, first_message: str) -> str:
    """The model's title in ``reply`` where it is one, else the first message's words."""
    return clean_title(reply, first_message) or fallback_title(first_message)
