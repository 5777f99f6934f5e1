"""Context policy settings and the events a chat session adds to the engine's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PolicyMode = Literal["summarize", "keep_last", "ask"]


@dataclass(frozen=True, kw_only=True)
class ContextPolicy:
    """How history is fitted into the context before every turn."""

    mode: PolicyMode = "summarize"
    threshold: float = 0.75  # summarize when the prompt passes this share of n_ctx
    every_k_turns: int = 0  # also summarize every K turns (0: off)
    keep_last_turns: int = 3  # turns kept verbatim after a summary, or by keep_last
    summary_max_words: int = 120
    summary_max_tokens: int = 200


@dataclass(frozen=True)
class PromptPlanEvent:
    """Which history the model is given this turn."""

    prompt_tokens: int
    n_ctx: int
    summary_id: int | None
    first_message_id: int | None  # the oldest message given verbatim
    dropped_messages: int  # left out by keep-last (still in the store)


@dataclass(frozen=True)
class SummaryEvent:
    """Summarizing started, finished, failed (fell back to keep-last) or was cancelled."""

    status: str  # "started", "done", "fallback", "cancelled"
    text: str = ""
    summary_id: int | None = None
    message: str = ""
    prefill_tokens: int = 0


@dataclass(frozen=True)
class MessageStored:
    """A message of this turn was written to the store (a reply while it is still streaming)."""

    message_id: int
    role: str
