"""A chat session's summaries: which messages fall out of the verbatim history, and
asking the loaded model (or a summary server) to fold them into the summary."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Protocol

from vllmchat.core.conversations.events import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.memory.summarize import SummaryOutcome, ask_for_summary
from vllmchat.core.conversations.store.store import ConversationStore, Message, Summary
from vllmchat.core.conversations.turns.documents import Documents
from vllmchat.core.conversations.turns.session_config import SessionConfig
from vllmchat.core.conversations.turns.summary_engine import summary_engine
from vllmchat.core.engine.events import EngineError, ErrorEvent, Event
from vllmchat.core.engine.protocol import Engine


def turn_starts(path: list[Message]) -> list[int]:
    """Indexes of the user messages that start each turn of ``path``."""
    return [i for i, m in enumerate(path) if m.role == "user"]


class PromptPlanner(Protocol):
    """What a session's summaries need of its prompt planning (``ChatSession``)."""

    def plan(self, path: list[Message]) -> tuple[list[dict[str, str]], PromptPlanEvent]: ...

    def verbatim_start(self, path: list[Message], summary: Summary | None) -> int: ...

    def history_budget(self, path: list[Message]) -> int: ...


class SessionSummaries:
    """A session's summaries: when one is due, what it covers, and writing it with the
    loaded model or the configured summary server (``config().summarizer``)."""

    def __init__(
        self,
        store: ConversationStore,
        client: Engine,
        conversation_id: int,
        *,
        documents: Documents,
        planner: PromptPlanner,
        config: Callable[[], SessionConfig],
        stopped: Callable[[], bool],
    ) -> None:
        self.store, self.client, self.conversation_id = store, client, conversation_id
        self._documents, self._planner = documents, planner
        self._config, self._stopped = config, stopped
        self.turns_since_summary = 0

    @property
    def policy(self) -> ContextPolicy:
        return self._config().policy

    def turn_taken(self) -> None:
        """A reply was written (a summary every k turns counts them)."""
        self.turns_since_summary += 1

    def should_summarize(self, plan: PromptPlanEvent, path: list[Message]) -> bool:
        if self.policy.mode != "summarize":
            return False
        over = plan.prompt_tokens > self.policy.threshold * plan.n_ctx
        periodic = bool(self.policy.every_k_turns) and (
            self.turns_since_summary >= self.policy.every_k_turns
        )
        return (
            over or periodic or plan.prompt_tokens > self._planner.history_budget(path)
        ) and bool(self.to_summarize(path))

    def to_summarize(self, path: list[Message], *, ahead: bool = False) -> list[Message]:
        """Messages newly falling out: after the current summary, before the last N turns
        (``ahead``: before the next message is written, so one turn fewer is kept)."""
        summary = self.store.summary_for(self.conversation_id, path)
        start = self._planner.verbatim_start(path, summary)
        starts = [i for i in turn_starts(path) if i >= start]
        keep = max(1, self.policy.keep_last_turns + (0 if ahead else 1))  # + the new message
        if len(starts) <= keep:
            return []
        return path[start : starts[-keep]]

    def summary_input(self, old: list[Message]) -> list[Message]:
        """What a summary is written from: never the pinned messages, nor those carrying a
        whole document (both kept word for word)."""
        docs = self._documents.of(old)
        return [m for m in old if not m.pinned and not docs.keeps(m)]

    def summarize(self) -> Iterator[SummaryEvent | Event]:
        """Summarize now (the user asked), whatever the thresholds say."""
        try:
            yield from self.summarize_path(self.store.path(self.conversation_id))
        except EngineError as exc:
            yield ErrorEvent(exc.kind, exc.message)

    def summarize_path(
        self,
        path: list[Message],
        *,
        ahead: bool = False,
        waiting: Callable[[], bool] = lambda: False,
    ) -> Iterator[SummaryEvent | Event]:
        """Fold the messages falling out of ``path``'s verbatim history into its summary
        (``ahead``: before the next message; ``waiting()``: a turn waits, give way)."""
        old = self.to_summarize(path, ahead=ahead)
        if not old:
            yield SummaryEvent("fallback", message="Nothing old enough to summarize yet.")
            return
        previous = self.store.summary_for(self.conversation_id, path)
        source = self.summary_input(old)
        if not source:
            yield SummaryEvent(
                "fallback", message="Only pinned messages are old enough; they stay word for word."
            )
            return
        yield SummaryEvent("started", message=f"Summarizing {len(source)} messages…")
        outcome, prefill = self._ask_for_summary(previous, source, waiting)
        if outcome.cancelled:
            yield SummaryEvent("cancelled", message="Summarizing was cancelled.")
            return
        if not outcome.ok:
            yield SummaryEvent(
                "fallback",
                message=f"{outcome.reason} Keeping the last "
                f"{self.policy.keep_last_turns} turns instead.",
            )
            return
        first = previous.first_message_id if previous else old[0].id
        summary = self.store.add_summary(
            self.conversation_id,
            outcome.text,
            first,
            old[-1].id,
            tokens=len(self.client.tokenize(outcome.text)),
        )
        self.turns_since_summary = 0
        done = f"Summarized {len(old)} messages" + (" ahead of the next turn." if ahead else ".")
        yield SummaryEvent(
            "done", outcome.text, summary.id, f"{done} {outcome.note}".strip(), prefill
        )

    def _ask_for_summary(
        self, previous: Summary | None, old: list[Message], waiting: Callable[[], bool]
    ) -> tuple[SummaryOutcome, int]:
        engine, note = summary_engine(self.client, self._config().summarizer)
        conversation = None
        if engine is self.client:  # after the conversation: its KV cache is reused
            with contextlib.suppress(EngineError):  # (a failure shows in the request)
                conversation, _ = self._planner.plan(self.store.path(self.conversation_id))
        outcome, prefill = ask_for_summary(
            engine,
            self.policy,
            previous,
            old,
            stopped=lambda: self._stopped() or waiting(),
            conversation=conversation,
        )
        if note and outcome.ok:
            outcome = replace(outcome, note=f"{note} {outcome.note}".strip())
        return outcome, prefill
