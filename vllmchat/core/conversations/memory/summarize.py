"""Summaries made by the loaded model itself, robust enough for small base models."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vllmchat.core.conversations.memory.facts import (
    FACTS_HEADER,
    SUMMARY_HEADER,
    MalformedSummary,
    TwoPartSummary,
    merge_facts,
    parse_answer,
    split_stored,
)
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.store.store import Message, Summary
from vllmchat.core.engine.events import DoneEvent, EngineError, ErrorEvent, StatsEvent, TokenEvent
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.engine.side_turns import SideTurn
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.thinking import answer_of

_CUT = re.compile(r"\n\s*\n|\n(?:User|You|Assistant|Model)\s*:", re.IGNORECASE)
_PER_MESSAGE_CHARS = 1200
_log = logging.getLogger(__name__)


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
    """Chat messages asking for the facts and a narrative of ``messages``, after
    ``previous`` (a stored summary, whose facts are kept by merging, not rewriting)."""
    earlier = ""
    if previous:
        old = split_stored(previous)
        if old.facts:
            earlier += "Facts known so far:\n" + "\n".join(f"- {f}" for f in old.facts) + "\n\n"
        if old.narrative:
            earlier += f"Summary so far: {old.narrative}\n\n"
    prompt = (
        f"{earlier}Conversation:\n{transcript(messages)}\n\n"
        f"Write two parts about the conversation above.\n{_two_parts(max_words)}"
    )
    return [{"role": "user", "content": prompt}]


def clean_summary(text: str, max_words: int) -> str:
    """The first paragraph, without a leading label, cut to ``max_words``."""
    text = text.strip()
    text = re.sub(
        r"^(?:\*\*)?(?:summary|conversation)(?:\*\*)?\s*:\s*", "", text, flags=re.IGNORECASE
    )
    cut = _CUT.search(text)
    if cut:
        text = text[: cut.start()]
    words = text.split()
    if len(words) > max_words:
        text = " ".join(words[:max_words]) + " …"
    return text.strip()


def after_request(policy: ContextPolicy) -> str:
    """The request asked after the conversation itself."""
    return (
        "Now write two parts about our whole conversation so far, the earlier summary "
        f"included.\n{_two_parts(policy.summary_max_words)}"
    )


def _two_parts(max_words: int) -> str:
    """What the two parts are, for either request."""
    return (
        'Facts: a list, one per line starting with "- ", as "topic: value", of the '
        "names, numbers, dates, preferences, decisions and open tasks stated. "
        "Copy names and numbers exactly.\n"
        f"Summary: one paragraph of at most {max_words} words.\n"
        'Write only these two parts, starting with "Facts:".'
    )


def answer_complete(text: str, max_words: int) -> bool:
    """Whether a summary answer, as it streams, already holds all that will be kept: a
    narrative past ``max_words`` or ended, or (no fact list) two paragraphs without
    one, whose first is the fallback. The rest would be cut anyway, so the engine is
    stopped there instead of writing to its token cap."""
    lines = text.splitlines(keepends=True)
    if any(FACTS_HEADER.match(line) for line in lines):
        at = 0
        for line in lines:
            head = SUMMARY_HEADER.match(line)
            if head:
                narrative = text[at + head.end() :]
                ended = re.search(r"\S\s*\n\s*\n", narrative)
                return len(narrative.split()) > max_words or ended is not None
            at += len(line)
        return False
    return len(text.split()) > max_words or len(re.findall(r"\S\s*\n\s*\n", text)) >= 2


def _fits_after(client: Engine, conversation: list[dict[str, str]], policy: ContextPolicy) -> bool:
    if not client.capabilities.prompt_cache or client.info is None:
        return False
    request = [*conversation, {"role": "user", "content": after_request(policy)}]
    try:
        return len(client.render(request)) + policy.summary_max_tokens < client.info.n_ctx
    except EngineError:  # a template that will not render it
        return False


def grounded(fact: str, source: str) -> bool:
    """Whether most of a fact's value words occur in ``source`` (the messages it was
    written from): an invented fact, or an old one restated, does not replace anything."""
    value = fact.split(":", 1)[1] if ":" in fact else fact
    words = [w for w in re.findall(r"\w+", value.lower()) if len(w) > 2 or w.isdigit()]
    if not words:
        return False
    seen = set(re.findall(r"\w+", source.lower()))
    return sum(w in seen for w in words) * 2 >= len(words)


def new_summary(
    answer: str,
    previous: str | None,
    source: str,
    max_words: int,
) -> tuple[TwoPartSummary, str]:
    """The summary to store from the model's ``answer``: the previous facts merged with
    the new grounded ones, and the new narrative. A malformed fact list falls back to
    the answer's first paragraph (the reason is returned and logged; the old facts are
    kept). The user's own statements are not copied here: the conversation's fact list
    (``fact_list.py``) keeps them word for word."""
    old = split_stored(previous) if previous else TwoPartSummary((), "")
    try:
        parsed = parse_answer(answer, max_words)
    except MalformedSummary as exc:
        reason = f"The fact list was malformed ({exc}); kept the paragraph."
        _log.warning("%s Answer: %.200r", reason, answer)
        return TwoPartSummary(old.facts, clean_summary(answer, max_words)), reason
    grounded_facts = tuple(f for f in parsed.facts if grounded(f, source))
    return TwoPartSummary(merge_facts(old.facts, grounded_facts), parsed.narrative), ""


@dataclass(frozen=True)
class SummaryOutcome:
    """What summarizing gave: the text, or why it was not used."""

    text: str = ""
    ok: bool = False
    reason: str = ""
    cancelled: bool = False
    note: str = ""  # kept, but with a caveat (a malformed fact list fell back)


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
    conversation: list[dict[str, str]] | None = None,
) -> tuple[SummaryOutcome, int]:
    """Ask ``client`` to summarize ``old`` after ``previous``; ``stopped`` is checked
    per event (a turn sent meanwhile stops it). Given the ``conversation``'s prompt
    (which holds ``old``), the request is asked after it, so the engine reuses the
    conversation's KV cache instead of reading a transcript."""
    request = summary_request(previous.content if previous else None, old, policy.summary_max_words)
    if conversation and conversation[-1]["role"] == "user":
        conversation = conversation[:-1]  # the new message waits (roles alternate)
    after = conversation is not None and _fits_after(client, conversation, policy)
    if conversation is not None and after:
        request = [*conversation, {"role": "user", "content": after_request(policy)}]
    sampling = SamplingSettings(
        temperature=0.2,
        top_k=20,
        repeat_penalty=1.15,
        max_tokens=policy.summary_max_tokens,
        seed=0,
        thinking=False,  # thinking is never put into a summary
    )
    text, note, prefill = "", "", 0
    if stopped():
        return SummaryOutcome(cancelled=True), 0
    previous_text = previous.content if previous else None
    source = " ".join(m.content for m in old)
    if conversation is not None and after:  # facts of the kept turns are grounded too
        source = " ".join(m["content"] for m in conversation)
    fresh, streamed, complete = "", "", False
    side = SideTurn(client)  # beside the API's turns where slots run
    for event in side.chat(request, sampling):
        if stopped():
            side.stop()  # a stop that came before the request reached the engine
        if isinstance(event, TokenEvent) and not complete:
            streamed += event.text
            complete = answer_complete(streamed, policy.summary_max_words)
            if complete:
                side.stop()  # all that is kept has been written
        elif isinstance(event, StatsEvent):
            prefill = event.stats.tokens_prefilled
        elif isinstance(event, ErrorEvent):
            return SummaryOutcome(reason=f"Summarizing failed: {event.message}"), prefill
        elif isinstance(event, DoneEvent):
            if (event.stop_reason == "stopped" and not complete) or stopped():
                return SummaryOutcome(cancelled=True), prefill
            answer = answer_of(event.text)
            made, note = new_summary(answer, previous_text, source, policy.summary_max_words)
            text = made.text()
            new = [f for f in made.facts if f in answer]
            fresh = made.narrative + " " + " ".join(new)
    if not text or not fresh.strip():
        return SummaryOutcome(reason="The summary came back empty."), prefill
    replaced = (previous.content + " " if previous else "") + source
    if len(client.tokenize(fresh)) >= len(client.tokenize(replaced)):
        return SummaryOutcome(reason="The summary was longer than what it replaces."), prefill
    return SummaryOutcome(text, ok=True, note=note), prefill
