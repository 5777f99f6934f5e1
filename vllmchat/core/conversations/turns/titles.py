"""Conversation titles made by the loaded model: asked after the first reply with the
conversation as the prompt's prefix (so the engine's KV cache is reused), cleaned to a
few words; the first words of the first message stay when the model cannot."""

from __future__ import annotations

import re

TITLE_PROMPT = (
    "Give this conversation a short title of two to six words. "
    "Reply with the title only, no quotes, no punctuation at the end."
)
MAX_WORDS = 6


def clean_title(text: str) -> str:
    """The first line, unquoted, without a "Title:" prefix, at most ``MAX_WORDS`` words;
    "" when nothing usable is left."""
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^(title|conversation title)\s*[:\-]\s*", "", line, flags=re.IGNORECASE)
    line = line.strip(" \t\"'`*#“”‘’").rstrip(".!?:;,")
    words = line.split()
    if not words or len(line) < 2:
        return ""
    return " ".join(words[:MAX_WORDS])[:60]
