"""Context policy settings and the events a chat session adds to the engine's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vllmchat.core.engine.events import ErrorEvent, ErrorKind

PolicyMode = Literal["summarize", "keep_last", "ask"]


@dataclass(frozen=True, kw_only=True)
class ContextPolicy:
    """How history is fitted into the context before every turn."""

    mode: PolicyMode = field(
        default="summarize", metadata={"help": "when history outgrows the context"}
    )
    threshold: float = field(
        default=0.75, metadata={"help": "summarize past this share of the context"}
    )
    every_k_turns: int = field(
        default=0, metadata={"help": "also summarize every K turns (0: off)"}
    )
    keep_last_turns: int = field(
        default=3, metadata={"help": "turns kept verbatim after a summary, or by keep_last"}
    )
    summary_max_words: int = field(default=120, metadata={"help": "word cap of a summary"})
    summary_max_tokens: int = field(
        default=320, metadata={"help": "token cap of a summary (facts and narrative)"}
    )
    summary_server: str = field(
        default="",
        metadata={
            "help": "an OpenAI-compatible server that writes the summaries (empty: "
            "the loaded model)"
        },
    )
    summary_model: str = field(
        default="", metadata={"help": "the summary server's model (empty: its first)"}
    )


@dataclass(frozen=True)
class PromptPlanEvent:
    """Which history the model is given this turn."""

    prompt_tokens: int
    n_ctx: int
    summary_id: int | None
    first_message_id: int | None  # the oldest message given verbatim
    dropped_messages: int  # left out by keep-last (still in the store)
    pinned_tokens: int = 0  # of the prompt, taken by pinned messages


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


@dataclass(frozen=True)
class PrefilledAhead:
    """The prompt the new summary makes was put into the KV cache while idle."""

    prompt_tokens: int
    prefilled_tokens: int
    complete: bool  # False: a turn came first


def pins_overflow(plan: PromptPlanEvent) -> ErrorEvent:
    """Pinned messages and the last turn over the context: which of them to shorten."""
    pins, total, n_ctx = plan.pinned_tokens, plan.prompt_tokens, plan.n_ctx
    over = f"the prompt is {total:,} tokens, more than the context ({n_ctx:,}) leaves for a reply"
    if pins * 2 >= total:
        said = f"The pinned messages take {pins:,} tokens; with the last turn {over}."
        return ErrorEvent(ErrorKind.CONTEXT_FULL, said, precise_fix="Unpin some, or raise n_ctx.")
    said = f"The last turn and the pinned messages ({pins:,} tokens) do not fit: {over}."
    fix = "Shorten the message (it is kept), unpin some, or raise n_ctx."
    return ErrorEvent(ErrorKind.CONTEXT_FULL, said, precise_fix=fix)
