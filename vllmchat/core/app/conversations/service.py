"""``Conversations``: the one owner of the stored conversations, for every front end.

Front ends read through its queries, which hand out frozen values (conversations,
messages, summaries, facts, attachments, tool steps, search hits), and change
things through its intents, each answered by a typed event from the events
modules (``EditRefused`` with the reason when nothing changed). Every change is
also told to the listeners (``subscribe``), whichever front end asked for it, so a
panel follows a change made in another one. A message's facts, taken while a turn
is stored, are told the same way (``FactsChanged``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from vllmchat.core.app.conversations.edits import ConversationEdits
from vllmchat.core.app.events import (
    AttachmentRemoved,
    ConversationDeleted,
    ConversationEdit,
    ConversationImported,
    ConversationRenamed,
    EditRefused,
    MessagePinned,
    SummaryEdited,
    ToolPickChanged,
)
from vllmchat.core.app.tools.choice import ToolPick, ToolPicks
from vllmchat.core.attachments.model import Attachment, ChunkHit
from vllmchat.core.conversations.events import Fact, FactsChanged
from vllmchat.core.conversations.memory.fact_list import FactList
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.records import Conversation, Message, Summary
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.listeners import Listeners
from vllmchat.core.tools.events import ToolResult

__all__ = [
    "Attachment",
    "ChunkHit",
    "Conversation",
    "ConversationChange",
    "Conversations",
    "Fact",
    "Message",
    "SearchHit",
    "Summary",
    "ToolPick",
]


ConversationChange = ConversationEdit | FactsChanged | AttachmentRemoved | ToolPickChanged
"""What ``Conversations`` tells its listeners."""
Listener = Callable[[ConversationChange], None]
Told = TypeVar("Told", bound=ConversationChange)


@dataclass(frozen=True)
class SearchHit:
    """A message that matches a search, in its conversation, with a marked snippet."""

    conversation: Conversation
    message: Message
    snippet: str


class Conversations:
    """Queries (frozen values) and intents (events) on every stored conversation.

    ``on_delete(conversation_id)`` is called once a conversation is deleted (the
    application lets go of it when it is open, and forgets its KV state)."""

    def __init__(
        self,
        store: ConversationStore,
        *,
        facts: FactList,
        attachments: AttachmentList,
        tool_picks: ToolPicks,
        edits: ConversationEdits,
        on_delete: Callable[[int], None] = lambda _: None,
    ) -> None:
        self._store = store
        self._facts = facts
        self._attachments = attachments
        self._picks = tool_picks
        self._edits = edits
        self._steps = ToolStepList(store)
        self._on_delete = on_delete
        self._listeners: Listeners[ConversationChange] = Listeners("conversations")
        facts.subscribe(self._tell)  # facts taken from a message while a turn is stored

    # -- listening ----------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` (in the changing thread) after every change; returns the
        call that unsubscribes it."""
        return self._listeners.subscribe(listener)

    def _tell(self, event: ConversationChange) -> None:
        self._listeners.tell(event)

    def _told(self, event: Told) -> Told:
        if not isinstance(event, (EditRefused, FactsChanged)):  # facts tell themselves
            self._tell(event)
        return event

    # -- queries: conversations and messages ---------------------------------------------
    def list(self) -> tuple[Conversation, ...]:
        """Every conversation, the most recently changed first."""
        return tuple(self._store.conversations())

    def conversation(self, conversation_id: int) -> Conversation | None:
        """One conversation (None: there is none with that id)."""
        try:
            return self._store.conversation(conversation_id)
        except StoreError:
            return None

    def messages(self, conversation_id: int) -> tuple[Message, ...]:
        """The current branch as a view shows it (texts, roles, pins, thinking), oldest
        first; none for an unknown conversation."""
        try:
            return tuple(self._store.path_to_show(conversation_id))
        except StoreError:
            return ()

    def branch(self, conversation_id: int) -> tuple[Message, ...]:
        """The current branch with every field (token counts, settings, stats)."""
        try:
            return tuple(self._store.path(conversation_id))
        except StoreError:
            return ()

    def message(self, message_id: int) -> Message | None:
        try:
            return self._store.message(message_id)
        except StoreError:
            return None

    def summaries(self, conversation_id: int) -> tuple[Summary, ...]:
        """Every summary of the conversation, oldest first."""
        return tuple(self._store.summaries(conversation_id))

    def summary(self, summary_id: int) -> Summary | None:
        try:
            return self._store.summary(summary_id)
        except StoreError:
            return None

    def current_summary(self, conversation_id: int) -> Summary | None:
        """The newest summary covering the start of the current branch."""
        return self._store.summary_for(conversation_id, list(self.branch(conversation_id)))

    def search(self, text: str, limit: int = 50) -> tuple[SearchHit, ...]:
        """Messages matching ``text`` (full text), best first."""
        return tuple(SearchHit(c, m, s) for c, m, s in self._store.search(text, limit))

    # -- queries: facts, attachments, tool steps, tool picks ------------------------------
    def facts(self, conversation_id: int) -> tuple[Fact, ...]:
        """The facts of the conversation's current branch, oldest first."""
        if self.conversation(conversation_id) is None:
            return ()
        return self._facts.facts(conversation_id)

    def fact(self, fact_id: int) -> Fact | None:
        try:
            return self._facts.fact(fact_id)
        except StoreError:
            return None

    def pending_attachments(self, conversation_id: int) -> tuple[Attachment, ...]:
        """The attachments waiting for the conversation's next user message."""
        return tuple(self._attachments.pending(conversation_id))

    def attachments_of(self, message_ids: Sequence[int]) -> dict[int, tuple[Attachment, ...]]:
        """The attachments sent with these messages, by message."""
        found = self._attachments.of_messages(message_ids)
        return {k: tuple(v) for k, v in found.items()}

    def attachment(self, attachment_id: int) -> Attachment | None:
        try:
            return self._attachments.get(attachment_id)
        except StoreError:
            return None

    def passages_used(self, reply_id: int) -> tuple[ChunkHit, ...]:
        """The passages of attached documents the reply was given, in rank order."""
        return tuple(self._attachments.used_by(reply_id))

    def tool_steps(self, message_ids: Sequence[int]) -> dict[int, tuple[ToolResult, ...]]:
        """Each reply's tool calls and results in order (replies without any left out)."""
        return {k: tuple(v) for k, v in self._steps.of_messages(message_ids).items()}

    def tool_pick(self, conversation_id: int) -> ToolPick:
        """The tools turned off in the conversation (servers, or ``server_tool``)."""
        return self._picks.pick(conversation_id)

    # -- intents --------------------------------------------------------------------------
    def rename(self, conversation_id: int, title: str) -> ConversationRenamed | EditRefused:
        """``ConversationRenamed``, or ``EditRefused``."""
        return self._told(self._edits.rename(conversation_id, title))

    def delete(self, conversation_id: int) -> ConversationDeleted | EditRefused:
        """``ConversationDeleted`` (with its KV state; the open one is let go of first),
        or ``EditRefused``."""
        if self.conversation(conversation_id) is None:
            return EditRefused("delete", f"There is no conversation {conversation_id}.")
        event = self._edits.delete(conversation_id)
        if isinstance(event, ConversationDeleted):
            self._on_delete(conversation_id)
        return self._told(event)

    def pin(self, message_id: int, pinned: bool) -> MessagePinned | EditRefused:
        """``MessagePinned`` (word for word in every prompt), or ``EditRefused``."""
        return self._told(self._edits.pin(message_id, pinned))

    def edit_summary(self, summary_id: int, text: str) -> SummaryEdited | EditRefused:
        """``SummaryEdited``, or ``EditRefused``."""
        return self._told(self._edits.edit_summary(summary_id, text))

    def import_file(self, path: str | Path) -> ConversationImported | EditRefused:
        """``ConversationImported`` (a JSON export stored as a new one), or ``EditRefused``."""
        return self._told(self._edits.import_file(path))

    def add_fact(self, conversation_id: int, text: str) -> FactsChanged | EditRefused:
        """A fact the user writes: ``FactsChanged``, or ``EditRefused`` (empty, too long,
        already there)."""
        return self._fact_change("fact", lambda: self._facts.add(conversation_id, text))

    def edit_fact(self, fact_id: int, text: str) -> FactsChanged | EditRefused:
        """The user's wording for a fact: ``FactsChanged``, or ``EditRefused``."""
        return self._fact_change("fact", lambda: self._facts.edit(fact_id, text))

    def delete_fact(self, fact_id: int) -> FactsChanged | EditRefused:
        """A fact removed (with the older statements it superseded): ``FactsChanged``,
        or ``EditRefused``."""
        return self._fact_change("fact", lambda: self._facts.delete(fact_id))

    def _fact_change(
        self, action: str, change: Callable[[], FactsChanged]
    ) -> FactsChanged | EditRefused:
        return self._edits.attempt(action, change)

    def detach(self, attachment_id: int) -> AttachmentRemoved | EditRefused:
        """Take back an attachment not sent yet: ``AttachmentRemoved``, or ``EditRefused``
        (it was sent with a message, or there is none)."""

        def remove() -> AttachmentRemoved:
            self._attachments.remove_pending(attachment_id)
            return AttachmentRemoved(attachment_id)

        event = self._edits.attempt("detach", remove)
        if isinstance(event, AttachmentRemoved):
            self._tell(event)
        return event

    def switch_tools(
        self, conversation_id: int, names: Sequence[str], on: bool
    ) -> ToolPickChanged | EditRefused:
        """Turn servers or tools on or off in a conversation from its next turn:
        ``ToolPickChanged``, or ``EditRefused`` (no servers, an unknown name)."""
        event = self._picks.switch(conversation_id, names, on)
        if isinstance(event, ToolPickChanged):
            self._tell(event)
        return event
