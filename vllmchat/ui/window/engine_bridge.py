"""The GUI's handle on the application layer: each call of ``ChatApp`` is a ``Worker``
on the engine's pool of one thread (one engine, one thread, calls in the order asked),
and each event type it yields comes out as its own signal on the GUI thread.

The events are published from the engine's thread as they are yielded (a direct
connection), so they keep their order, and a call that raises ends in an
``ErrorEvent`` the window shows. ``stop()`` is safe from the GUI thread: it sets
the session's flag, checked per token in the engine process.

The GUI thread never reaches into the application layer's objects: it reads
``snapshot`` (settings, capabilities, model, machine), which the engine's thread
publishes before each event that may follow a change, and it sends intents. The
user's quick changes to stored conversations (new, rename, pin, a summary, import)
touch only the store, which serialises its writes: they are made at once and their
events published on the calling thread; a deletion waits its turn on the engine's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, QThreadPool, QTimer, Signal, SignalInstance

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    AttachmentAdded,
    AttachmentRejected,
    AttachmentRemoved,
    ConversationCreated,
    ConversationDeleted,
    ConversationEdit,
    ConversationImported,
    ConversationOpened,
    ConversationRenamed,
    EditRefused,
    EngineDied,
    Loaded,
    LoadFailed,
    LoadStarted,
    MessagePinned,
    PlacementFellBack,
    PlacementNeedsConfirmation,
    SettingsChanged,
    StorageWarning,
    SummaryEdited,
    TitleMade,
    TurnStarted,
)
from vllmchat.core.app.settings_model import Persist
from vllmchat.core.app.snapshot import AppSnapshot
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import (
    MessageStored,
    PassagesUsed,
    PromptPlanEvent,
    SummaryEvent,
    ThinkingEvent,
    ThoughtFor,
)
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import (
    DoneEvent,
    ErrorEvent,
    ErrorKind,
    PrefillProgressEvent,
    StatsEvent,
    TokenEvent,
)
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.placement import Placement
from vllmchat.core.tuning.events import PointMeasured, TuneFinished, TuneStarted
from vllmchat.core.tuning.results import TuneConfig
from vllmchat.ui.common.workers import Worker, WorkerGroup, work_name
from vllmchat.ui.window.tool_events import ToolEvents


class AppEvents(QObject):
    """One signal per event type; ``publish`` is called on the engine's thread."""

    load_started = Signal(object)
    """``LoadStarted``: input waits until the load ends."""
    load_finished = Signal(object)
    """``Loaded``: the model (and, after a live reload, whether the KV state came along)."""
    load_failed = Signal(object)
    """``LoadFailed``: why, and the fix."""
    conversation_opened = Signal(object)
    """``ConversationOpened``: the KV tokens restored for it."""
    turn_started = Signal(object)
    """``TurnStarted``."""
    message_stored = Signal(object)
    """``MessageStored``: a message of this turn has its id in the store."""
    token_received = Signal(str)
    """The text of one sampled token."""
    prefill_progress = Signal(int, int)
    """Prompt tokens read so far, of the total."""
    prompt_planned = Signal(object)
    attachment_added = Signal(object)
    """``AttachmentAdded``: a file waits for the next message (whole, or by passages)."""
    attachment_rejected = Signal(object)
    """``AttachmentRejected``: a file was not attached, and why."""
    attachment_removed = Signal(object)
    passages_used = Signal(object)
    """``PassagesUsed``: the passages of documents a reply was given."""
    """``PromptPlanEvent``: which history the model is given."""
    summary_changed = Signal(object)
    """``SummaryEvent``."""
    stats_ready = Signal(object)
    """``TurnStats`` of the turn."""
    turn_finished = Signal(object)
    """``DoneEvent``."""
    turn_failed = Signal(object)
    """``ErrorEvent``."""
    engine_died = Signal(object)
    """``EngineDied``: reported once per death, from a turn or while idle."""
    settings_changed = Signal(object)
    """``SettingsChanged``: the settings the application layer now runs with."""
    placement_needs_confirmation = Signal(object)
    """``PlacementNeedsConfirmation``: past the estimate's bound; ask before loading."""
    placement_fell_back = Signal(object)
    """``PlacementFellBack``: the engine ended at a placement and runs at the last one again."""
    snapshot_changed = Signal(object)
    """``AppSnapshot``: what the GUI thread may read, as of the events that follow."""
    storage_warning = Signal(object)
    """``StorageWarning``: something could not be written to disk; what is safe."""
    thinking_received = Signal(str)
    """Thinking streamed by a reasoning model (shown folded)."""
    thought_for = Signal(float)
    """The thinking ended after so many seconds; the answer begins."""
    title_made = Signal(object)
    """``TitleMade``: the conversation's title, by the model or its first words."""
    tune_started = Signal(object)
    """``TuneStarted``: points planned, the budget."""
    tune_point = Signal(object)
    """``PointMeasured``: one configuration measured, progress and ETA."""
    tune_finished = Signal(object)
    """``TuneFinished``: the points and the pick."""
    conversation_created = Signal(object)
    """``ConversationCreated``: a new, empty conversation."""
    conversation_renamed = Signal(object)
    """``ConversationRenamed``: the title the user gave."""
    conversation_deleted = Signal(object)
    """``ConversationDeleted``: gone, with its saved KV state."""
    conversation_imported = Signal(object)
    """``ConversationImported``: read from a file as a new conversation."""
    message_pinned = Signal(object)
    """``MessagePinned``: pinned or unpinned."""
    summary_edited = Signal(object)
    """``SummaryEdited``: a summary rewritten by hand."""
    edit_refused = Signal(object)
    """``EditRefused``: a change the user asked for was not made, and why."""

    def __init__(self, app: ChatApp) -> None:
        super().__init__()
        self.app = app
        self.tools = ToolEvents(self)  # servers' states, approvals, calls' results
        self._published = app.snapshot()
        self._signals: dict[type, SignalInstance] = {
            LoadStarted: self.load_started,
            Loaded: self.load_finished,
            LoadFailed: self.load_failed,
            ConversationOpened: self.conversation_opened,
            TurnStarted: self.turn_started,
            MessageStored: self.message_stored,
            PromptPlanEvent: self.prompt_planned,
            AttachmentAdded: self.attachment_added,
            AttachmentRejected: self.attachment_rejected,
            AttachmentRemoved: self.attachment_removed,
            PassagesUsed: self.passages_used,
            SummaryEvent: self.summary_changed,
            DoneEvent: self.turn_finished,
            ErrorEvent: self.turn_failed,
            EngineDied: self.engine_died,
            TitleMade: self.title_made,
            StorageWarning: self.storage_warning,
            SettingsChanged: self.settings_changed,
            PlacementNeedsConfirmation: self.placement_needs_confirmation,
            PlacementFellBack: self.placement_fell_back,
            TuneStarted: self.tune_started,
            PointMeasured: self.tune_point,
            TuneFinished: self.tune_finished,
        }
        self._edits: dict[type, SignalInstance] = {
            ConversationCreated: self.conversation_created,
            ConversationRenamed: self.conversation_renamed,
            ConversationDeleted: self.conversation_deleted,
            ConversationImported: self.conversation_imported,
            MessagePinned: self.message_pinned,
            SummaryEdited: self.summary_edited,
            EditRefused: self.edit_refused,
        }

    def publish_snapshot(self, *_: object) -> None:
        """Emit the application layer's snapshot when it changed (on the engine's thread)."""
        snapshot = self.app.snapshot()
        if snapshot != self._published:
            self._published = snapshot
            self.snapshot_changed.emit(snapshot)

    def publish(self, event: object) -> None:
        """Emit the signal of this event's type."""
        if event is None:
            return
        if isinstance(event, TokenEvent):
            self.token_received.emit(event.text)
        elif isinstance(event, PrefillProgressEvent):
            self.prefill_progress.emit(event.done, event.total)
        elif isinstance(event, StatsEvent):
            self.stats_ready.emit(event.stats)
        elif isinstance(event, ThinkingEvent):
            self.thinking_received.emit(event.text)
        elif isinstance(event, ThoughtFor):
            self.thought_for.emit(event.seconds)
        elif self.tools.publish(event):
            pass
        elif type(event) in self._edits:  # the store's alone: no snapshot to publish
            self._edits[type(event)].emit(event)
        elif type(event) in self._signals:
            self.publish_snapshot()  # the GUI thread reads it as of this event
            self._signals[type(event)].emit(event)


class EngineBridge(QObject):
    """Queues ``ChatApp`` intents to the engine's thread; its ``events`` signal on the GUI
    thread, and ``snapshot`` is what the GUI thread knows of the application layer."""

    def __init__(
        self,
        store: ConversationStore,
        kv: KVStateCache,
        parent: QObject | None = None,
        *,
        settings: AppSettings | None = None,
        persist: Persist | None = None,
        engine: Engine | None = None,
    ) -> None:
        super().__init__(parent)
        self.app = ChatApp(store, kv, settings, engine=engine, persist=persist)
        self.snapshot: AppSnapshot = self.app.snapshot()
        self.events = AppEvents(self.app)
        self.events.snapshot_changed.connect(self._on_snapshot)
        self.pool = QThreadPool(self)  # the engine's one thread, for the engine's life
        self.pool.setObjectName("vllmchat-engine")
        self.pool.setMaxThreadCount(1)
        self.pool.setExpiryTimeout(-1)
        self.jobs = WorkerGroup(self, pool=self.pool)
        self._closed = False
        self._tune_stop = threading.Event()
        self.turn_waiting = threading.Event()  # a turn was asked for and has not started
        # Direct: cleared on the engine thread as the turn starts, before any title job.
        self.events.turn_started.connect(self._on_turn_started, Qt.ConnectionType.DirectConnection)
        self._timer = QTimer(self)
        self._timer.setInterval(500)
        self._timer.timeout.connect(self._check_alive)
        self._timer.start()

    @property
    def busy(self) -> bool:
        """A call is running on the engine's thread or waiting for it."""
        return self.jobs.busy

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Worker | None:
        """Run ``fn(*args, **kwargs)`` on the engine's thread; what it yields (or returns)
        becomes signals, and an exception an ``ErrorEvent``. None once closed: a call the
        window's last events ask for (a title after the last reply) is not run."""
        if self._closed:
            return None
        job = functools.partial(fn, *args, **kwargs)
        name = work_name(job)
        worker = Worker(job, functools.partial(self._failed, name), name=name)
        direct = Qt.ConnectionType.DirectConnection
        worker.yielded.connect(self.events.publish, direct)
        worker.returned.connect(self.events.publish, direct)
        worker.returned.connect(self.events.publish_snapshot, direct)
        worker.errored.connect(self.events.publish_snapshot, direct)
        return self.jobs.start(worker)

    def _failed(self, name: str, exc: Exception) -> None:
        self.events.publish(ErrorEvent(ErrorKind.INTERNAL, f"{name} failed: {exc!r}"))

    # -- intents: the application layer changes its settings, and announces them --------
    def start(self) -> None:
        """Load the saved model, or connect to the saved server."""
        self.call(self.app.start)

    def open_model(self, path: str) -> None:
        """Chat with the model file at ``path`` on the local engine."""
        self.call(self.app.open_model, path)

    def use_server(self, url: str, model: str = "") -> None:
        """Chat through a server (the local engine ended, its KV state saved)."""
        self.call(self.app.use_server, url, model)

    def set_placement(self, placement: Placement, *, confirmed: bool = False) -> None:
        """Reload live with the weights placed anew (past the estimate's bound only
        ``confirmed``; else the application layer asks back)."""
        self.call(self.app.set_placement, placement, confirmed=confirmed)

    def configure(self, **changes: Any) -> None:
        """Change settings by field name (load settings reload live)."""
        self.call(self.app.configure, **changes)

    def restart(self, *, fewer_layers: bool = False) -> None:
        self.call(self.app.restart, fewer_layers=fewer_layers)

    # -- conversations and turns ----------------------------------------------------------
    def open_conversation(self, conversation_id: int) -> None:
        self.call(self.app.open_conversation, conversation_id)

    def send(self, text: str) -> None:
        self.turn_waiting.set()
        self.call(self.app.send, text)

    def attach(self, path: str) -> None:
        """Attach a file to the next message (read and measured on the engine's thread)."""
        self.call(self.app.attach, path)

    def detach(self, attachment_id: int) -> None:
        self.call(self.app.detach, attachment_id)

    def regenerate(self) -> None:
        self.turn_waiting.set()
        self.call(self.app.regenerate)

    def edit(self, message_id: int, text: str) -> None:
        self.turn_waiting.set()
        self.call(self.app.edit, message_id, text)

    def make_title(self) -> None:
        """After a reply: the model's title when it was the conversation's first."""
        self.call(self.app.make_title, busy=self.turn_waiting.is_set, after_first_reply=True)

    def prepare_next(self) -> None:
        """After a reply: the summary the next turn would need, written and prefilled
        while the user reads (a turn sent meanwhile stops it within a token)."""
        self.call(self.app.prepare_next, busy=self.turn_waiting.is_set)

    def summarize(self) -> None:
        self.call(self.app.summarize)

    def stop(self) -> None:
        self.app.stop()

    def tune(self, budget_s: float, *, fresh: bool = False) -> None:
        """Measure GPU layers and threads (``stop_tune`` ends it within a token)."""
        self._tune_stop.clear()
        self.call(self.app.tune, budget_s, fresh=fresh, should_stop=self._tune_stop.is_set)

    def stop_tune(self) -> None:
        self._tune_stop.set()
        self.app.stop_tune()

    def apply_tune(self, config: TuneConfig) -> None:
        self.call(self.app.apply_tune, config)

    # -- the user's changes to stored conversations -----------------------------------
    def _edited(self, event: ConversationEdit) -> ConversationEdit:
        self.events.publish(event)
        return event

    def new_conversation(self) -> ConversationCreated | EditRefused:
        """A new conversation with the settings' system prompt (announced, and returned)."""
        made = self.app.edits.create(system_prompt=self.snapshot.settings.system_prompt)
        self._edited(made)
        return made

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self._edited(self.app.edits.rename(conversation_id, title))

    def pin_message(self, message_id: int, pinned: bool) -> None:
        self._edited(self.app.edits.pin(message_id, pinned))

    def edit_summary(self, summary_id: int, text: str) -> None:
        self._edited(self.app.edits.edit_summary(summary_id, text))

    def import_conversation(self, path: str) -> None:
        self._edited(self.app.edits.import_file(path))

    def delete_conversation(self, conversation_id: int) -> None:
        """On the engine's thread: after the turn in progress, the open session let go."""
        self.call(self.app.delete_conversation, conversation_id)

    def _on_snapshot(self, snapshot: AppSnapshot) -> None:
        self.snapshot = snapshot

    def _on_turn_started(self, _event: object) -> None:
        self.turn_waiting.clear()

    def _check_alive(self) -> None:
        """Report an engine that died while idle."""
        if not self.busy:
            self.call(self.app.watch)

    def close(self) -> None:
        """Stop, save the KV state, end the engine process and the thread (once)."""
        if self._closed:
            return
        self._timer.stop()
        self.stop()  # the turn in progress ends within a token, its reply kept
        self.jobs.skip_queued()  # titles and summaries asked for after the last reply
        self.call(self.app.shutdown)
        self._closed = True
        self.jobs.wait(60_000)
        self.pool.waitForDone(1_000)  # the thread ends with the calls
        self.snapshot = self.app.snapshot()  # the engine's thread has ended: the last word
