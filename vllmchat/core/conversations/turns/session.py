"""A chat session: one conversation of the store, answered by the engine.

Before every turn the prompt is fitted into ``n_ctx`` minus the reply's
reserve: summarize (the loaded model summarizes the turns before the last N,
incrementally), keep the last N turns, or stop and ask. Nothing is cut
silently: a ``PromptPlanEvent`` says which history the model is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.conversations.events import (
    MessageStored,
    PromptPlanEvent,
    SessionEvent,
    SummaryEvent,
)
from vllmchat.core.conversations.memory.fact_list import FactList
from vllmchat.core.conversations.memory.policy import pins_overflow
from vllmchat.core.conversations.memory.summarize import pinned_block
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import (
    ROOT,
    ConversationStore,
    Message,
    Summary,
)
from vllmchat.core.conversations.turns.documents import Documents, given_in_place
from vllmchat.core.conversations.turns.reply_writer import ReplyWriter
from vllmchat.core.conversations.turns.session_config import SessionConfig, ToolStream
from vllmchat.core.conversations.turns.session_summaries import SessionSummaries, turn_starts
from vllmchat.core.conversations.turns.tool_history import step_replies, with_tool_steps
from vllmchat.core.engine.events import EngineError, ErrorEvent, ErrorKind, Event
from vllmchat.core.engine.media_text import neutralise
from vllmchat.core.engine.protocol import Engine

__all__ = ["ChatSession", "SessionConfig", "ToolStream"]


class ChatSession:
    """Send, regenerate, edit and summarize one conversation, as ``config`` says."""

    def __init__(
        self,
        store: ConversationStore,
        client: Engine,
        conversation_id: int,
        config: SessionConfig | None = None,
        *,
        facts: FactList | None = None,
        attachments: AttachmentList | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: seconds, for how often a streaming reply is saved."""
        self.store = store
        self.client = client
        self.conversation_id = conversation_id
        self._config = config or SessionConfig()
        self.facts = facts or FactList(store)  # the user's facts, kept through summaries
        self.stop_requested = False
        self._clock = clock
        self._counts: dict[str, int] = {}  # tokens of pinned texts (the engine's count)
        self.documents = Documents(
            attachments or AttachmentList(store),
            client,
            conversation_id,
            embedding_model=lambda: self._config.embedding_model,
            should_stop=lambda: self.stop_requested,
        )
        self._replies = ReplyWriter(
            store, client, conversation_id, self.documents.attachments, clock
        )
        self.summaries = SessionSummaries(
            store,
            client,
            conversation_id,
            documents=self.documents,
            planner=self,
            config=lambda: self._config,
            stopped=lambda: self.stop_requested,
        )

    @property
    def config(self) -> SessionConfig:
        """How the session answers (read only: ``configure`` replaces it)."""
        return self._config

    def configure(self, config: SessionConfig) -> None:
        """Answer as ``config`` says from the next turn (or summary) on."""
        self._config = config

    # Read by the tools' turn (``ToolOffer.serve``): kept until it builds the config.
    @property
    def tool_stream(self) -> ToolStream | None:
        return self._config.tool_stream

    @tool_stream.setter
    def tool_stream(self, stream: ToolStream | None) -> None:
        self.configure(self._config.changed(tool_stream=stream))

    @property
    def tool_tokens(self) -> Callable[[], int]:
        return self._config.tool_tokens

    @tool_tokens.setter
    def tool_tokens(self, tokens: Callable[[], int]) -> None:
        self.configure(self._config.changed(tool_tokens=tokens))

    # -- prompt ----------------------------------------------------------------
    def _prompt(
        self, path: list[Message], summary: Summary | None, start: int
    ) -> list[dict[str, str]]:
        docs = self.documents.of(path)
        path = docs.view(path)
        system = self.store.conversation(self.conversation_id).system_prompt
        facts = self.facts.prompt_block(self.conversation_id, path, start)
        pins = "\n\n".join(b for b in (pinned_block(path[:start]), facts) if b)
        if pins:  # pinned messages and facts no longer given in place: word for word, up front
            system = (system + "\n\n" if system else "") + pins
        if summary is not None:
            system = (system + "\n\n" if system else "") + (
                "Earlier in this conversation:\n" + summary.content
            )
        prompt = [{"role": "system", "content": neutralise(system)}] if system else []
        return prompt + with_tool_steps(self.store, path[start:], docs.with_images)

    def _measure(self, prompt: list[dict[str, str]], path: list[Message], start: int) -> int:
        """Tokens of ``prompt``, which gives ``path[start:]`` in place with their images."""
        images = self.documents.of(path).image_tokens(path[start:])
        return len(self.client.render(prompt)) + images + self._config.tool_tokens()

    def verbatim_start(self, path: list[Message], summary: Summary | None) -> int:
        if summary is None:
            return 0
        ids = [m.id for m in path]
        return ids.index(summary.last_message_id) + 1

    def plan(self, path: list[Message]) -> tuple[list[dict[str, str]], PromptPlanEvent]:
        """The prompt for ``path`` under the current summary, and what it contains."""
        summary = self.store.summary_for(self.conversation_id, path)
        start = self.verbatim_start(path, summary)
        prompt = self._prompt(path, summary, start)
        n = self._measure(prompt, path, start)
        first = path[start].id if start < len(path) else None
        pinned = self._pinned_tokens(path, start)
        plan = PromptPlanEvent(
            n,
            self._n_ctx(),
            summary.id if summary else None,
            first,
            0,
            pinned,
            self.documents.of(path).whole_tokens,
            tool_tokens=self._config.tool_tokens(),
        )
        return prompt, plan

    def _pinned_tokens(self, path: list[Message], start: int) -> int:
        """Tokens the pinned messages take in a prompt that gives ``path[start:]`` in place."""
        path = self.documents.of(path).view(path)
        block = pinned_block(path[:start])
        n = self._count(block) if block else 0
        return n + sum(self._count(m.content) for m in path[start:] if m.pinned)

    def _count(self, text: str) -> int:
        """Tokens of ``text``, remembered (a whole document is counted once, not per turn)."""
        if text not in self._counts:
            if len(self._counts) > 64:
                self._counts.clear()
            self._counts[text] = len(self.client.tokenize(text))
        return self._counts[text]

    def _n_ctx(self) -> int:
        if self.client.info is None:
            raise EngineError(ErrorKind.NO_MODEL, "No model is loaded.")
        return self.client.info.n_ctx

    def prompt_budget(self) -> int:
        n_ctx = self._n_ctx()
        return n_ctx - min(self._config.sampling.max_tokens, n_ctx // 2)

    def history_budget(self, path: list[Message]) -> int:
        """The budget for the history: the prompt's, less room for passages."""
        return self.prompt_budget() - self.documents.reserve(path)

    # -- turns -----------------------------------------------------------------------
    def send(self, text: str) -> Iterator[SessionEvent]:
        """Store the user's message and stream the reply."""
        attachments = self.documents.attachments
        if not text.strip() and not attachments.pending(self.conversation_id):
            yield ErrorEvent(ErrorKind.BAD_REQUEST, "The message is empty.")
            return
        message = self.store.add_message(self.conversation_id, "user", text)
        attachments.bind_pending(self.conversation_id, message.id)
        self.facts.take_from(message)
        yield MessageStored(message.id, "user")
        yield from self._answer()

    def regenerate(self) -> Iterator[SessionEvent]:
        """A new reply to the last user message; the old reply stays as a branch."""
        path = self.store.path(self.conversation_id)
        while path and path[-1].role != "user":
            path.pop()
        if not path:
            yield ErrorEvent(ErrorKind.BAD_REQUEST, "There is no message to answer.")
            return
        self.store.set_leaf(self.conversation_id, path[-1].id)
        yield from self._answer()

    def edit(self, message_id: int, text: str) -> Iterator[SessionEvent]:
        """Replace a user message with ``text`` on a new branch and answer it."""
        original = self.store.message(message_id)
        if original.role != "user":
            yield ErrorEvent(ErrorKind.BAD_REQUEST, "Only your own messages can be edited.")
            return
        message = self.store.add_message(
            self.conversation_id, "user", text, parent_id=original.parent_id or ROOT
        )
        self.documents.attachments.copy(original.id, message.id)  # the edit keeps them
        self.facts.take_from(message)
        yield MessageStored(message.id, "user")
        yield from self._answer()

    def summarize(self) -> Iterator[SummaryEvent | Event]:
        """Summarize now (the user asked), whatever the thresholds say."""
        self.stop_requested = False
        yield from self.summaries.summarize()

    def summarize_ahead(
        self, path: list[Message], waiting: Callable[[], bool]
    ) -> Iterator[SummaryEvent | Event]:
        """The summary the turn after ``path`` would write, written now; ``waiting()``
        (a turn waits) stops it within a token."""
        self.stop_requested = False
        yield from self.summaries.summarize_path(path, ahead=True, waiting=waiting)

    def stop(self) -> None:
        """Stop the reply or the summary in progress (any thread)."""
        self.stop_requested = True
        self.client.stop()

    def _answer(self) -> Iterator[SessionEvent]:
        """Answer the branch's last message; engine failures become an ``ErrorEvent``."""
        try:
            yield from self._answer_unguarded()
        except EngineError as exc:
            yield ErrorEvent(exc.kind, exc.message)

    def _answer_unguarded(self) -> Iterator[SessionEvent]:
        self.stop_requested = False
        path = self.store.path(self.conversation_id)
        prompt, plan = self.plan(path)
        if self.summaries.should_summarize(plan, path):
            for event in self.summaries.summarize_path(path):
                yield event
                if isinstance(event, SummaryEvent) and event.status == "cancelled":
                    return
            prompt, plan = self.plan(path)
        if plan.prompt_tokens > self.history_budget(path):
            if self._config.policy.mode == "ask":
                yield ErrorEvent(
                    ErrorKind.CONTEXT_FULL,
                    (
                        f"The conversation ({plan.prompt_tokens:,} tokens) no longer fits the "
                        f"context ({plan.n_ctx:,}): summarize it or start a new one."
                    ),
                )
                return
            prompt, plan = self._keep_last(path, plan)
            if plan.prompt_tokens > self.history_budget(path) and plan.pinned_tokens:
                yield plan
                yield pins_overflow(plan)
                return
        prompt, plan, hits = self._with_passages(path, prompt, plan)
        yield plan
        if plan.prompt_tokens >= plan.n_ctx:
            yield ErrorEvent(
                ErrorKind.PROMPT_TOO_LONG,
                f"The message alone is {plan.prompt_tokens:,} tokens; the "
                f"context holds {plan.n_ctx:,}.",
            )
            return
        images = self.documents.of(path).images(given_in_place(path, plan.first_message_id))
        yield from self._replies.stream(self._config, prompt, plan, hits, images)
        self.summaries.turn_taken()

    def _with_passages(
        self, path: list[Message], prompt: list[dict[str, str]], plan: PromptPlanEvent
    ) -> tuple[list[dict[str, str]], PromptPlanEvent, list[ChunkHit]]:
        """The prompt with the passages its question retrieves (as many as fit)."""
        room = self.prompt_budget() - plan.prompt_tokens
        prompt, hits = self.documents.passages(path, prompt, room)
        if not hits:
            return prompt, plan, []
        given = given_in_place(path, plan.first_message_id)
        n = self._measure(prompt, path, len(path) - len(given))
        return prompt, replace(plan, prompt_tokens=n, passage_tokens=n - plan.prompt_tokens), hits

    def passages_for(self, question: str) -> list[ChunkHit]:
        """The passages a question sent now would be given (nothing is stored)."""
        path = self.store.path(self.conversation_id)
        ids = self.documents.of(path).retrieval_ids
        _, plan = self.plan(path)
        room = self.prompt_budget() - plan.prompt_tokens - len(self.client.tokenize(question))
        return self.documents.search(ids, question, room)

    def _keep_last(
        self, path: list[Message], plan: PromptPlanEvent
    ) -> tuple[list[dict[str, str]], PromptPlanEvent]:
        """Drop the oldest turns from the prompt (never from the store) until it fits."""
        summary = self.store.summary_for(self.conversation_id, path)
        start = self.verbatim_start(path, summary)
        starts = [i for i in turn_starts(path) if i >= start]
        prompt = self._prompt(path, summary, start)
        for cut in [*starts[1:], len(path) - 1]:
            prompt = self._prompt(path, summary, cut)
            n = self._measure(prompt, path, cut)
            plan = PromptPlanEvent(
                n,
                plan.n_ctx,
                summary.id if summary else None,
                path[cut].id,
                cut - start,
                self._pinned_tokens(path, cut),
                plan.document_tokens,
                tool_tokens=plan.tool_tokens,
            )
            if n <= self.history_budget(path):
                break
        return prompt, plan

    # -- reopening -----------------------------------------------------------------------
    def prime(self) -> None:
        """Tell the engine the sampled ids of this branch's replies (KV reuse after reopen)."""
        path = self.store.path(self.conversation_id)
        replies = [(m.content, m.token_ids) for m in path if m.role == "assistant" and m.token_ids]
        self.client.remember_replies([*step_replies(self.store, path), *replies])

    def context_info(self) -> PromptPlanEvent:
        """Tokens the next prompt would use, and where the verbatim history begins."""
        _, plan = self.plan(self.store.path(self.conversation_id))
        return plan
