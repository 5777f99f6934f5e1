"""Summaries made by the loaded model itself, robust enough for small base models."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from vllmchat.core.conversations.store import Message

_CUT = re.compile(r"\n\s*\n|\n(?:User|You|Assistant|Model)\s*:", re.IGNORECASE)
_PER_MESSAGE_CHARS = 1200


def transcript(messages: Sequence[Message]) -> str:
    """Turns as plain ``User: …`` / ``Assistant: …`` lines, long messages shortened."""
    lines = []
    for m in messages:
        who = "User" if m.role == "user" else "Assistant"
        text = " ".join(m.content.split())
        if len(text) > _PER_MESSAGE_CHARS:
            text = text[: _PER_MESSAGE_CHARS // 2] + " … " + text[-_PER_MESSAGE_CHARS // 2 :]
        lines.append(f"{who}: {text}")
    return "\n".join(lines)


def summary_request(
    previous: str | None, messages: Sequence[Message], max_words: int
) -> list[dict[str, str]]:
    """Chat messages asking for an incremental summary."""
    earlier = f"Summary so far: {previous}\n\n" if previous else ""
    prompt = (
        f"{earlier}Conversation:\n{transcript(messages)}\n\n"
        f"Write a summary of the conversation above in at most {max_words} words, in one "
        "paragraph. Keep names, facts, numbers and decisions. Write only the summary."
    )
    return [{"role": "user", "content": prompt}]


def clean_summary(text: str, max_words: int) -> str:
    """The first paragraph, without a leading label, cut to ``max_words``."""
    text = text.strip()
    text = re.sub(r"^(?:\*\*)?summary(?:\*\*)?\s*:\s*", "", text, flags=re.IGNORECASE)
    cut = _CUT.search(text)
    if cut:
        text = text[: cut.start()]
    words = text.split()
    if len(words) > max_words:
        text = " ".join(words[:max_words]) + " …"
    return text.strip()


@dataclass(frozen=True)
class SummaryOutcome:
    """What summarizing gave: the text, or why it was not used."""

    text: str = ""
    ok: bool = False
    reason: str = ""
    cancelled: bool = False
