"""Text that only looks like an image's place: a ``MEDIA_MARKER`` the user typed, a
document holds, a tool returned or a model wrote is neutralised before it reaches a
prompt, so that only the markers the app puts before a message's images count.

The marker gets a word joiner (U+2060, invisible and zero-width) after its ``<``:
it reads the same, but is no longer llama.cpp's marker. The stored texts keep what
was typed; only prompts are neutralised.
"""

from __future__ import annotations

from vllmchat.core.engine.images import MEDIA_MARKER

WORD_JOINER = "\u2060"
NEUTRAL_MARKER = MEDIA_MARKER[0] + WORD_JOINER + MEDIA_MARKER[1:]


def neutralise(text: str) -> str:
    """``text`` with every ``MEDIA_MARKER`` in it made plain text."""
    return text.replace(MEDIA_MARKER, NEUTRAL_MARKER) if MEDIA_MARKER in text else text


def neutralise_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Copies of ``messages`` whose contents hold no marker of their own."""
    return [{**m, "content": neutralise(m["content"])} for m in messages]
