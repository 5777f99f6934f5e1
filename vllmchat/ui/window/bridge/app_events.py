"""The application layer's events as Qt signals: one signal per event type, emitted
on the engine's thread as the events are yielded (connected directly, so they keep
their order), and the snapshot the GUI thread reads published before each event
that may follow a change."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, SignalInstance

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    AttachmentAdded,
    AttachmentRejected,
    AttachmentRemoved,
    ConversationCreated,
    ConversationDeleted,
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
from vllmchat.core.conversations.events import (
    MessageStored,
    PassagesUsed,
    PromptPlanEvent,
    SummaryEvent,
    ThinkingEvent,
    ThoughtFor,
)
from vllmchat.core.engine.events import (
    DoneEvent,
    ErrorEvent,
    PrefillProgressEvent,
    StatsEvent,
    TokenEvent,
)
from vllmchat.core.tuning.events import PointMeasured, TuneFinished, TuneStarted
from vllmchat.ui.window.bridge.tool_events import ToolEvents


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
    """``PromptPlanEvent``: which history the model is given."""
    attachment_added = Signal(object)
    """``AttachmentAdded``: a file waits for the next message (whole, or by passages)."""
    attachment_rejected = Signal(object)
    """``AttachmentRejected``: a file was not attached, and why."""
    attachment_removed = Signal(object)
    passages_used = Signal(object)
    """``PassagesUsed``: the passages of documents a reply was given."""
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
