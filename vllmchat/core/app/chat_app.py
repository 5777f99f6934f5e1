"""``ChatApp``: what both front ends do, without Qt and without a terminal.

It owns the engine's life and the settings. Every operation that takes time is a
generator of typed events, so the terminal prints them and the window turns each into
a signal; ``stop()`` may be called from any thread. The settings change only here, by
intents (``load``, ``set_placement``, ``configure``, ``open_model``, ``use_server``,
``apply_tune``, ``restart``), announced as ``SettingsChanged`` and written once the
model has loaded with them; a placement that ends the engine is taken back
(``PlacementFellBack``). Its components: ``open_session`` (the open conversation, a new
chat pending), ``turns``, ``conversations``, ``attaching``, ``reading``, ``tuning``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from vllmchat.core.app.conversations.attachment_intents import AttachmentIntents
from vllmchat.core.app.conversations.edits import ConversationEdits
from vllmchat.core.app.conversations.reading import Reading
from vllmchat.core.app.conversations.service import Conversations
from vllmchat.core.app.engine_queue import EngineQueue
from vllmchat.core.app.engines import EngineSpec, open_engine, open_local
from vllmchat.core.app.events import (
    AppEvent,
    ConversationDeleted,
    ConversationOpened,
    EditRefused,
    EngineDied,
    Loaded,
    LoadFailed,
    LoadStarted,
    NewChatPending,
    PlacementFellBack,
    PlacementNeedsConfirmation,
    PlacementProposed,
)
from vllmchat.core.app.open_session import OpenSession
from vllmchat.core.app.placement.placing import (
    ABORTS,
    Estimator,
    PlacementEstimates,
    fell_back,
    learn_from_load,
    room_for_placing,
)
from vllmchat.core.app.placement.tuning import Tuning, describe_file
from vllmchat.core.app.settings_model import Persist, SettingsModel
from vllmchat.core.app.snapshot import AppSnapshot
from vllmchat.core.app.tools.choice import ToolOffer, ToolPicks
from vllmchat.core.app.tools.service import ToolsService
from vllmchat.core.app.tools.turns import ToolChoice
from vllmchat.core.app.turn_running import TurnRunner
from vllmchat.core.app.voice.service import VoiceService
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.memory.fact_list import FactList
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import Engine, core_lender
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.placement import Placement
from vllmchat.core.tools.events import ToolsConfigProblem

_log = logging.getLogger(__name__)


class ChatApp:
    """Load, reload live, switch conversations, chat, summarize, checkpoint, shut down."""

    def __init__(
        self,
        store: ConversationStore,
        kv: KVStateCache,
        settings: AppSettings | None = None,
        *,
        engine: Engine | None = None,
        persist: Persist | None = None,
        estimator: Estimator | None = None,
    ) -> None:
        """``persist``: where confirmed settings are written (None: nowhere);
        ``estimator``: how a placement fits the machine (``check_fit``)."""
        self.store, self.kv = store, kv  # kv: the engine's kept states, within the caps
        kv.caps = lambda: self.settings.state_caps()
        self._settings = SettingsModel(settings or AppSettings(), persist)
        self.engine: Engine = engine or open_local()
        self.engine_queue = EngineQueue()  # the window's turns and the API's, in turn
        self.facts = FactList(store)  # every conversation's facts: front ends edit them here
        self.edits = ConversationEdits(store)  # new, rename, pin, summaries, import
        self.attachments = AttachmentList(store)  # every conversation's attached files
        self.hardware: HardwareInfo | None = None  # as the engine saw it at the last load
        self.room: HardwareInfo | None = None  # as a new placement of that model finds it
        self.description: ModelDescription | None = None
        self.placements = PlacementEstimates(estimator)
        self._ran = False  # a model loaded with the current settings
        self._untried: Placement | None = None  # the placement before one no turn ran at
        self._death_reported = False
        self.open_session = OpenSession(
            store,
            kv,
            engine=lambda: self.engine,
            settings=lambda: self.settings,
            facts=self.facts,
            attachments=self.attachments,
            edits=self.edits,
        )
        self.turns = TurnRunner(
            self.open_session,
            kv,
            self.engine_queue,
            engine=lambda: self.engine,
            died=self._died,
            ran=self._ran_a_turn,
        )
        self.tool_picks = ToolPicks(store)  # each conversation's tools: front ends change them
        self.tools = ToolsService()  # MCP servers, approvals, calls: front ends subscribe
        self.conversations = Conversations(
            store,
            facts=self.facts,
            attachments=self.attachments,
            tool_picks=self.tool_picks,
            edits=self.edits,
            on_delete=self.open_session.let_go,
        )
        self.tuning = Tuning(
            lambda: self.engine, lambda: self.settings, self.load, self.open_session.save_state
        )
        self.reading = Reading(lambda: self.session, lambda: self.engine)
        self.attaching = AttachmentIntents(
            store, self.attachments, lambda: self.session, self.open_session.stored_pending
        )
        self._voice: VoiceService | None = None

    @property
    def voice(self) -> VoiceService:
        """Speech to text and text to speech (made at first use, ended at shutdown)."""
        if self._voice is None:
            self._voice = VoiceService(lambda: self.settings, cores=self._lent_cores)
        return self._voice

    def _lent_cores(self) -> AbstractContextManager[object]:
        """A core of the engine's for a moment, where it lends one (``core_turns``)."""
        lender = core_lender(self.engine)
        return lender.lend_cores() if lender is not None else nullcontext()

    @property
    def settings(self) -> AppSettings:
        """The settings the app runs with (read only: intents change them)."""
        return self._settings.current

    @property
    def session(self) -> ChatSession | None:
        """The open conversation's session (None: none is open)."""
        return self.open_session.session

    @property
    def conversation_id(self) -> int | None:
        return self.open_session.conversation_id

    def snapshot(self) -> AppSnapshot:
        """What a front end on another thread may read (call on the engine's thread)."""
        engine = self.engine
        return AppSnapshot(
            self.settings,
            engine.capabilities,
            engine.alive,
            engine.pid,
            engine.info,
            self.hardware,
            self.room,
            self.description,
        )

    # -- model ----------------------------------------------------------------------------
    def load(
        self,
        settings: AppSettings,
        *,
        live: bool = False,
        fall_back: bool = True,
        remember: bool = True,
    ) -> Iterator[AppEvent]:
        """Load ``settings``' model; ``live`` keeps the conversation's KV state across;
        ``remember`` False: the model is not written as the user's choice (an API
        client's request).

        The settings are taken (announced, written) only once the model has loaded; when
        the engine ends at a new placement of the same model, it is brought back at the
        last placement that ran (``fall_back``)."""
        yield LoadStarted(live)
        before = self.settings
        try:
            if live and self.engine.alive and self.engine.info is not None:
                result = self.engine.reload(settings.load)
                info, restored = result.info, 0
            else:
                result, info = None, self.engine.load(settings.load)
                restored = self.open_session.reprime()
            hardware = self.engine.probe()
        except EngineError as exc:
            _log.warning("Loading %s failed: %s", settings.load.model_path, exc, exc_info=exc)
            same_model = settings.load.model_path == before.load.model_path
            moved = settings.load.placement != before.load.placement
            if fall_back and exc.kind in ABORTS and self._ran and same_model and moved:
                yield from self._fall_back(settings.load.placement, before, exc.message)
                return
            self._ran = self._ran and self.engine.info is not None
            yield LoadFailed(exc.kind, exc.message, exc.fix)
            return
        moved = settings.load.placement != before.load.placement
        self._untried = before.load.placement if fall_back and self._ran and moved else None
        self._ran = True
        yield from self._settings.adopt(settings, loaded=remember)
        self.open_session.configure()
        self._death_reported = False
        description = describe_file(info.path)
        learn_from_load(self.engine, hardware, description, settings.load)
        self.hardware, self.description = hardware, description
        self.room = room_for_placing(hardware, info.buffers_mib)
        yield Loaded(info, settings, result, restored, hardware, description)

    def _fall_back(self, failed: Placement, to: AppSettings, reason: str) -> Iterator[AppEvent]:
        """The engine ended at ``failed``: a fresh one at ``to``'s placement, with the
        conversation's last checkpoint."""
        restored = to.load.placement
        yield PlacementFellBack(failed, restored, reason, fell_back(failed, restored, reason))
        self._untried = None
        self.engine.close()
        yield from self.load(to, fall_back=False)

    def propose_placement(self, placement: Placement) -> PlacementProposed:
        """The estimate of ``placement`` on the machine a reload finds, made once and
        answered as its event (a query: safe on any thread, it changes nothing)."""
        return self.placements.propose(self.description, self.room, self.settings, placement)

    def set_placement(self, placement: Placement, *, confirmed: bool = False) -> Iterator[AppEvent]:
        """Reload live with the weights placed anew. A placement at or past the estimate's
        bound loads only ``confirmed``; unconfirmed, ``PlacementNeedsConfirmation`` says why."""
        settings = self.settings.with_placement(placement)
        if settings == self.settings and self._ran:
            return
        why = self.placements.past_bound(self.description, self.room, settings)
        if why and not confirmed:
            yield PlacementNeedsConfirmation(placement, why)
            return
        yield from self.load(settings, live=True)

    def configure(self, **changes: Any) -> Iterator[AppEvent]:
        """Change settings by field name; a change to the load settings reloads live
        (with no model loaded, it waits for the next load, which writes it)."""
        settings = self.settings.with_changes(**changes)
        reload = settings.needs_reload(self.settings)
        if reload and self.engine.info is not None:
            yield from self.load(settings, live=True)
            return
        # No model holds the load settings yet: the next load uses them, and only a load
        # that succeeds writes them.
        yield from self._settings.adopt(settings)
        self.open_session.configure()

    def start(self) -> Iterator[AppEvent]:
        """Load the saved model, or connect to the saved server."""
        yield from self.switch(self.settings)

    def open_model(self, path: str) -> Iterator[AppEvent]:
        """Chat with the model file at ``path`` on the local engine."""
        yield from self.switch(self.settings.for_model(path, server_url="", server_model=""))

    def use_server(self, url: str, model: str = "") -> Iterator[AppEvent]:
        """Chat through a server from now on (its key is in the keyring)."""
        yield from self.switch(self.settings.with_changes(server_url=url, server_model=model))

    def switch(self, settings: AppSettings) -> Iterator[AppEvent]:
        """Load ``settings`` on the engine they name (a server, or the local engine)."""
        spec = EngineSpec.of(settings)
        if not spec.local or not self.engine.capabilities.local_memory:
            self.use_engine(open_engine(spec))
        yield from self.load(settings)

    def restart(self, *, fewer_layers: bool = False) -> Iterator[AppEvent]:
        """A fresh engine with the last settings (a quarter fewer GPU layers if asked);
        the conversation's last checkpoint is restored."""
        settings = self.settings
        n = settings.load.placement.n_gpu_layers
        if fewer_layers and n > 0:
            settings = settings.with_changes(n_gpu_layers=max(0, n - max(1, n // 4)))
        self.engine.close()
        yield from self.load(settings, fall_back=False)

    def use_engine(self, engine: Engine) -> None:
        """Chat through another engine (the local process, or a server) from now on.

        The open conversation's KV state is saved and the old engine ended first.
        """
        conversation = self.conversation_id
        self.shutdown()
        self.engine = engine
        self._death_reported = False
        self._ran, self._untried = False, None
        self.hardware = self.room = self.description = None
        if conversation is not None:
            self.open_session.session = self.open_session.made(conversation)

    def use_tools(
        self,
        config_file: Path | None,
        *,
        must_exist: bool = False,
        tool_choice: ToolChoice = "auto",
    ) -> ToolsConfigProblem | None:
        """Offer the MCP servers of ``config_file`` in every turn from now on (None: no
        tools; ``must_exist``: the user named it); ``tool_choice="required"`` makes each
        turn's first step a call. A config that cannot be used is the problem returned."""
        problem = self.tools.use(config_file, must_exist=must_exist, tool_choice=tool_choice)
        self.tool_picks.service = self.tools
        offer = ToolOffer(self.tools, self.tool_picks) if self.tools.active else None
        self.open_session.tools = offer
        self.open_session.configure()
        return problem

    # -- conversations --------------------------------------------------------------------
    def new_chat(self, *, system_prompt: str | None = None) -> NewChatPending:
        """Start a new chat: nothing is stored until its first message is sent (``send``
        then yields ``ConversationCreated`` and ``ConversationOpened`` first). The open
        conversation's KV state is saved and it is let go of."""
        return self.open_session.new_chat(system_prompt)

    @property
    def pending(self) -> NewChatPending | None:
        """The new chat waiting for its first message (None: none is)."""
        return self.open_session.pending

    def open_conversation(self, conversation_id: int) -> ConversationOpened:
        """Save the old conversation's KV state and restore the new one's."""
        return self.open_session.open(conversation_id)

    def delete_conversation(self, conversation_id: int) -> ConversationDeleted | EditRefused:
        """Delete a conversation with its saved KV state; the open one is let go of."""
        return self.conversations.delete(conversation_id)

    # -- turns (``TurnRunner``) -----------------------------------------------------------
    def send(self, text: str) -> Iterator[AppEvent]:
        """A user message and its reply (a pending new chat is stored first)."""
        return self.turns.send(text)

    def regenerate(self) -> Iterator[AppEvent]:
        return self.turns.run(lambda s: s.regenerate())

    def edit(self, message_id: int, text: str) -> Iterator[AppEvent]:
        return self.turns.run(lambda s: s.edit(message_id, text))

    def summarize(self) -> Iterator[AppEvent]:
        return self.turns.run(lambda s: s.summarize())

    def stop(self) -> None:
        """Stop the reply or summary in progress (any thread; within one token)."""
        self.turns.stop()

    # -- the engine's life ----------------------------------------------------------------
    def _ran_a_turn(self) -> None:
        self._untried = None  # the placement loaded is one a turn ran at

    def _died(self, kind: ErrorKind, reason: str) -> Iterator[AppEvent]:
        """A turn ended the engine (or ran out of memory): at a placement no turn ran at
        yet, back to the last one that did; else the death is reported (once)."""
        untried = self._untried
        if untried is not None:
            placement = self.settings.load.placement
            yield from self._fall_back(placement, self.settings.with_placement(untried), reason)
        elif kind == ErrorKind.ENGINE_DIED and not self._death_reported:
            self._death_reported = True
            _log.error("%s", reason)
            yield EngineDied(reason)

    def watch(self) -> EngineDied | None:
        """An ``EngineDied`` when the engine ended since the last load (reported once)."""
        if self.engine.info is None or self._death_reported:
            return None
        reason = self.engine.exit_reason()
        if reason is None:
            return None
        self._death_reported = True
        _log.error("%s", reason)
        return EngineDied(reason)

    def shutdown(self) -> None:
        """Save the open conversation's KV state and end the engine."""
        self.open_session.save_state()
        self.engine.close()
        if self._voice is not None:
            self._voice.close()
