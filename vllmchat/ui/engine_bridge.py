"""The one adapter between the GUI and the engine: core events in, Qt signals out.

The ``EngineClient`` and the chat session live on one worker thread (one
engine, one thread); the GUI thread only emits requests and receives
signals. ``stop()`` is safe from the GUI thread: it sets the session's flag and
tells the engine process, which checks it per token.
"""

from __future__ import annotations

import contextlib
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal, Slot

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.kv_cache import KVStateCache
from vllmchat.core.conversations.policy import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.session import ChatSession
from vllmchat.core.conversations.store import ConversationStore
from vllmchat.core.engine import (
    DoneEvent,
    EngineClient,
    EngineError,
    ErrorEvent,
    ErrorKind,
    PrefillProgressEvent,
    StatsEvent,
    TokenEvent,
)
from vllmchat.core.engine.client import describe_exit


class _Worker(QObject):
    """Runs on the engine thread; every slot may block."""

    load_started = Signal()
    load_finished = Signal(object, object)  # ModelInfo, reload result dict or None
    load_failed = Signal(str, str)  # kind, message
    turn_started = Signal()
    token_received = Signal(str)
    prefill_progress = Signal(int, int)
    prompt_planned = Signal(object)
    summary_changed = Signal(object)
    stats_ready = Signal(object)
    turn_finished = Signal(object)
    turn_failed = Signal(object)
    busy_changed = Signal(int)  # not bool: PySide6 on 3.11 over-releases queued bools

    def __init__(self, store: ConversationStore, kv: KVStateCache) -> None:
        super().__init__()
        self.client = EngineClient()
        self.store = store
        self.kv = kv
        self.session: ChatSession | None = None
        self.settings = AppSettings()

    @Slot(object, int)
    def load(self, settings: AppSettings, live: int) -> None:
        self.busy_changed.emit(1)
        self.load_started.emit()
        try:
            if live and self.client.alive and self.client.info is not None:
                result = self.client.reload(settings.load_settings())
                self.load_finished.emit(result["info"], result)
            else:
                info = self.client.load(settings.load_settings())
                self._reprime()
                self.load_finished.emit(info, None)
            self.settings = settings
            self._configure()
        except EngineError as exc:
            self.load_failed.emit(exc.kind.value, str(exc))
        finally:
            self.busy_changed.emit(0)

    @Slot(object)
    def configure(self, settings: AppSettings) -> None:
        self.settings = settings
        self._configure()

    def _configure(self) -> None:
        if self.session is not None:
            self.session.sampling = self.settings.sampling()
            self.session.policy = self.settings.context_policy()

    def _reprime(self) -> None:
        if self.session is not None and self.client.alive and self.client.info is not None:
            self.session.prime()
            self.kv.restore(self.client, self.session.conversation_id)

    @Slot(int)
    def open_conversation(self, conversation_id: int) -> None:
        """Save the old conversation's KV state, restore the new one's."""
        if self.session is not None and self.session.conversation_id == conversation_id:
            return
        if self.session is not None and self.client.alive:
            self.kv.save(self.client, self.session.conversation_id)
        name = self.client.info.name if self.client.info else ""
        self.session = ChatSession(self.store, self.client, conversation_id, model_name=name)
        self._configure()
        with contextlib.suppress(EngineError):
            self._reprime()

    @Slot(str, object)
    def run(self, kind: str, args: Any) -> None:
        if self.session is None:
            return
        self.busy_changed.emit(1)
        self.turn_started.emit()
        try:
            if kind == "send":
                events = self.session.send(args)
            elif kind == "regenerate":
                events = self.session.regenerate()
            elif kind == "edit":
                events = self.session.edit(*args)
            else:
                events = self.session.summarize()
            for event in events:
                self._emit(event)
        except EngineError as exc:
            self.turn_failed.emit(ErrorEvent(exc.kind, exc.message))
        finally:
            self.busy_changed.emit(0)

    def _emit(self, event: Any) -> None:
        if isinstance(event, TokenEvent):
            self.token_received.emit(event.text)
        elif isinstance(event, PrefillProgressEvent):
            self.prefill_progress.emit(event.done, event.total)
        elif isinstance(event, PromptPlanEvent):
            self.prompt_planned.emit(event)
        elif isinstance(event, SummaryEvent):
            self.summary_changed.emit(event)
        elif isinstance(event, StatsEvent):
            self.stats_ready.emit(event.stats)
        elif isinstance(event, DoneEvent):
            self.turn_finished.emit(event)
        elif isinstance(event, ErrorEvent):
            self.turn_failed.emit(event)

    @Slot()
    def shutdown(self) -> None:
        if self.session is not None and self.client.alive:
            self.kv.save(self.client, self.session.conversation_id)
        self.client.close()


class EngineBridge(QObject):
    """The GUI's handle on the engine. Signals are emitted on the GUI thread."""

    engine_died = Signal(str)
    """The engine process ended unexpectedly; the message says how."""

    _load = Signal(object, int)
    _run = Signal(str, object)
    _open = Signal(int)
    _configure = Signal(object)
    _shutdown = Signal()

    def __init__(
        self, store: ConversationStore, kv: KVStateCache, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.thread = QThread()
        self.thread.setObjectName("vllmchat-engine-thread")
        self.worker = _Worker(store, kv)
        self.worker.moveToThread(self.thread)
        self.events = self.worker  # connect to its signals: token_received, turn_finished, …
        self._load.connect(self.worker.load)
        self._run.connect(self.worker.run)
        self._open.connect(self.worker.open_conversation)
        self._configure.connect(self.worker.configure)
        # Blocking: the KV state is saved and the process ended before the thread quits.
        self._shutdown.connect(self.worker.shutdown, Qt.ConnectionType.BlockingQueuedConnection)
        self.worker.busy_changed.connect(self._on_busy)
        self.busy = False
        self._was_alive = False
        self.thread.start()
        self._watch = QTimer(self)
        self._watch.setInterval(500)
        self._watch.timeout.connect(self._check_alive)
        self._watch.start()

    @property
    def client(self) -> EngineClient:
        return self.worker.client

    def load(self, settings: AppSettings, *, live: bool = False) -> None:
        self._load.emit(settings, int(live))

    def configure(self, settings: AppSettings) -> None:
        self._configure.emit(settings)

    def open_conversation(self, conversation_id: int) -> None:
        self._open.emit(conversation_id)

    def send(self, text: str) -> None:
        self._run.emit("send", text)

    def regenerate(self) -> None:
        self._run.emit("regenerate", None)

    def edit(self, message_id: int, text: str) -> None:
        self._run.emit("edit", (message_id, text))

    def summarize(self) -> None:
        self._run.emit("summarize", None)

    def stop(self) -> None:
        session = self.worker.session
        if session is not None:
            session.stop()
        else:
            self.client.stop()

    def _on_busy(self, busy: int) -> None:
        self.busy = bool(busy)

    def _check_alive(self) -> None:
        alive = self.client.alive
        if self._was_alive and not alive and not self.busy:
            proc = self.client._proc
            self.engine_died.emit(describe_exit(proc.exitcode if proc is not None else None))
        self._was_alive = alive

    def notice_death(self, event: ErrorEvent) -> None:
        """A turn failed because the engine died: tell the window once."""
        if event.kind == ErrorKind.ENGINE_DIED:
            self._was_alive = False
            self.engine_died.emit(event.message)

    def close(self) -> None:
        """Save the KV state, end the engine process and the thread."""
        self._watch.stop()
        self.stop()
        self._shutdown.emit()
        self.thread.quit()
        self.thread.wait(15000)
