"""The open conversation: its chat session on the engine, or a new chat waiting for its
first message. ``OpenSession`` is their one owner; ``ChatApp`` holds it and keeps the
engine's life.

Opening a conversation saves the old one's KV state and restores the new one's; a new
chat is stored only when its first message is sent; a deleted conversation that is
open is let go of. Each session is configured from the settings, the summary server
and the tools offered, and again when one of them changes (``configure``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from vllmchat.core.app.conversations.edits import ConversationEdits
from vllmchat.core.app.engines import SummaryServer
from vllmchat.core.app.events import (
    AppEvent,
    ConversationCreated,
    ConversationOpened,
    NewChatPending,
)
from vllmchat.core.app.tools.choice import ToolOffer
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.memory.fact_list import FactList
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.conversations.turns.session import ChatSession, SessionConfig
from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.protocol import Engine


class OpenSession:
    """The session of the open conversation (None: none is open) and the new chat
    pending (None: none is)."""

    def __init__(
        self,
        store: ConversationStore,
        kv: KVStateCache,
        *,
        engine: Callable[[], Engine],
        settings: Callable[[], AppSettings],
        facts: FactList,
        attachments: AttachmentList,
        edits: ConversationEdits,
    ) -> None:
        self._store, self._kv = store, kv
        self._engine, self._settings = engine, settings
        self._facts, self._attachments, self._edits = facts, attachments, edits
        self._summary_server = SummaryServer()
        self.tools: ToolOffer | None = None  # the tools each turn offers (None: none)
        self.session: ChatSession | None = None
        self.pending: NewChatPending | None = None

    @property
    def conversation_id(self) -> int | None:
        return self.session.conversation_id if self.session is not None else None

    # -- opening and leaving ----------------------------------------------------------------
    def new_chat(self, system_prompt: str | None) -> NewChatPending:
        """A new chat, stored at its first message; the open one is saved and let go of."""
        self.save_state()
        self.session = None
        prompt = self._settings().system_prompt if system_prompt is None else system_prompt
        self.pending = NewChatPending(prompt)
        return self.pending

    def stored_pending(self) -> Iterator[AppEvent]:
        """The pending new chat stored and opened (at its first message)."""
        pending = self.pending
        if pending is None or self.session is not None:
            return
        made = self._edits.create(system_prompt=pending.system_prompt)
        yield made
        if isinstance(made, ConversationCreated):
            self.pending = None
            yield self.open(made.conversation_id)

    def open(self, conversation_id: int) -> ConversationOpened:
        """Save the old conversation's KV state and restore the new one's."""
        self.pending = None
        engine = self._engine()
        if self.session is not None and self.session.conversation_id == conversation_id:
            return ConversationOpened(conversation_id, 0)
        if self.session is not None and engine.alive:
            self._kv.save(engine, self.session.conversation_id)
        self.session = self.made(conversation_id)
        restored = 0
        with contextlib.suppress(EngineError):
            restored = self.reprime()
        return ConversationOpened(conversation_id, restored)

    def let_go(self, conversation_id: int) -> None:
        """``conversation_id`` was deleted: its KV state forgotten, the session let go
        of when it is the open one."""
        self._kv.forget(self._engine(), conversation_id)
        if self.conversation_id == conversation_id:
            self.session = None

    # -- the session on the engine ----------------------------------------------------------
    def made(self, conversation_id: int) -> ChatSession:
        """A session of ``conversation_id`` on the engine, configured."""
        session = ChatSession(
            self._store,
            self._engine(),
            conversation_id,
            facts=self._facts,
            attachments=self._attachments,
        )
        session.configure(self._config(session))
        return session

    def configure(self) -> None:
        """Give the open session the configuration the settings and tools make."""
        if self.session is not None:
            self.session.configure(self._config(self.session))

    def _config(self, session: ChatSession) -> SessionConfig:
        settings, engine = self._settings(), self._engine()
        history = settings.history
        config = SessionConfig(
            sampling=settings.sampler,
            policy=history,
            model_name=engine.info.name if engine.info else "",
            summarizer=self._summary_server.engine(history.summary_server, history.summary_model),
            embedding_model=settings.embedding_model,
        )
        tools, conversation = self.tools, session.conversation_id
        if tools is None:
            return config
        return config.with_tools(
            tools.stream(engine, session), lambda: tools.tokens(engine, conversation)
        )

    def reprime(self) -> int:
        """Give the engine this conversation's reply ids and its saved KV state."""
        engine = self._engine()
        if self.session is None or not engine.alive or engine.info is None:
            return 0
        self.session.prime()
        return self._kv.restore(engine, self.session.conversation_id)

    def save_state(self) -> None:
        """Save the open conversation's KV state (when a model holds one)."""
        engine = self._engine()
        if self.session is not None and engine.alive and engine.info is not None:
            self._kv.save(engine, self.session.conversation_id)
