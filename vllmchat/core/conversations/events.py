"""The events a conversation adds to the engine's: the prompt's plan, summaries, stored
messages, a reasoning model's thinking, and the work done ahead while the user reads."""

from __future__ import annotations

from dataclasses import dataclass

from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.engine.events import Event
from vllmchat.core.tools.events import ToolEvent


@dataclass(frozen=True)
class PromptPlanEvent:
    """Which history the model is given this turn."""

    prompt_tokens: int
    n_ctx: int
    summary_id: int | None
    first_message_id: int | None  # the oldest message given verbatim
    dropped_messages: int  # left out by keep-last (still in the store)
    pinned_tokens: int = 0  # of the prompt, taken by pinned messages
    document_tokens: int = 0  # of the prompt, taken by whole documents (the context bar)
    passage_tokens: int = 0  # of the prompt, taken by passages retrieved for the question
    tool_tokens: int = 0  # of the prompt, taken by the offered tools' schemas


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


@dataclass(frozen=True)
class ThinkingEvent:
    """A piece of the model's thinking (shown folded while it streams)."""

    text: str


@dataclass(frozen=True)
class ThoughtFor:
    """The thinking ended (the answer begins): how long it took."""

    seconds: float


@dataclass(frozen=True)
class PassagesUsed:
    """The passages of attached documents the reply ``message_id`` was given (each
    with its document, page or section; stored with the reply)."""

    message_id: int
    passages: tuple[ChunkHit, ...]


@dataclass(frozen=True)
class Fact:
    """One fact; ``message_id`` is the user message it was taken from (None: the
    user wrote it), ``edited`` whether the user wrote or changed it."""

    id: int
    conversation_id: int
    text: str
    message_id: int | None = None
    edited: bool = False


@dataclass(frozen=True)
class FactsChanged:
    """A conversation's facts changed: ``facts`` are those of its current branch."""

    conversation_id: int
    facts: tuple[Fact, ...]


ReplyEvent = Event | ThinkingEvent | ThoughtFor | ToolEvent
"""A reply as the front ends see it: the engine's events, the thinking told apart, and
the tool steps of a turn with tools (servers' states, approvals, results)."""

SessionEvent = ReplyEvent | PromptPlanEvent | SummaryEvent | MessageStored | PassagesUsed
"""What a turn of a chat session yields."""
