"""Context policy settings: how history is fitted into the context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vllmchat.core.conversations.events import PromptPlanEvent
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
