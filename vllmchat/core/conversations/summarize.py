"""Summaries made by the loaded model itself, robust enough for small base models."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vllmchat.core.conversations.policy import ContextPolicy
from vllmchat.core.conversations.store import Message, Summary
from vllmchat.core.engine import DoneEvent, ErrorEvent, StatsEvent
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.settings import SamplingSettings

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


def pinned_block(messages: list[Message]) -> str:
    """The pinned ones among ``messages``, word for word, for the system prompt."""
    pins = [m for m in messages if m.pinned]
    if not pins:
        return ""
    lines = [f"{m.role.capitalize()}: {m.content}" for m in pins]
    return "Pinned messages, word for word:\n" + "\n".join(lines)


def ask_for_summary(
    client: Engine,
    policy: ContextPolicy,
    previous: Summary | None,
    old: list[Message],
    *,
    stopped: Callable[[], bool],
) -> tuple[SummaryOutcome, int]:
    """Ask ``client`` to summarize ``old`` after ``previous``; ``stopped`` is checked
    per event (a turn sent meanwhile stops it)."""
    request = summary_request(previous.content if previous else None, old, policy.summary_max_words)
    sampling = SamplingSettings(
        temperature=0.2,
        top_k=20,
        repeat_penalty=1.15,
        max_tokens=policy.summary_max_tokens,
        seed=0,
    )
    text, prefill = "", 0
    if stopped():
        return SummaryOutcome(cancelled=True), 0
    for event in client.chat(request, sampling):
        if stopped():
            client.stop()  # a stop that came before the request reached the engine
        if isinstance(event, StatsEvent):
            prefill = event.stats.tokens_prefilled
        elif isinstance(event, ErrorEvent):
            return SummaryOutcome(reason=f"Summarizing failed: {event.message}"), prefill
        elif isinstance(event, DoneEvent):
            if event.stop_reason == "stopped" or stopped():
                return SummaryOutcome(cancelled=True), prefill
            text = clean_summary(event.text, policy.summary_max_words)
    if not text:
        return SummaryOutcome(reason="The summary came back empty."), prefill
    replaced = (previous.content + " " if previous else "") + " ".join(m.content for m in old)
    if len(client.tokenize(text)) >= len(client.tokenize(replaced)):
        return SummaryOutcome(reason="The summary was longer than what it replaces."), prefill
    return SummaryOutcome(text, ok=True), prefill

    # -- titles -------------------------------------------------------------------------
