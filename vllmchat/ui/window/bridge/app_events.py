"""The application layer's events as Qt signals, made from the events modules' table.

Every event type (``event_table.event_types``) has one signal, named after it
(``LoadStarted``: ``load_started``) and carrying the event; a new event type gets its
signal without anyone declaring one. ``publish`` emits an event's signal by its type.

The engine's thread publishes what the application layer yields as it is yielded
(connected directly, so the events keep their order), after the snapshot the GUI
thread reads (``snapshot_changed``), for each event that may follow a change; the
user's quick edits and the tool servers publish on their own threads, without one.
An event is announced once, however many ways it is handed in (an intent's answer
that its owner also told its listeners).

Some signals keep older names while the window moves to the generated ones:
``OLD_NAMES`` are the same signals under another name, and ``FIELD_SIGNALS`` carry
fields of an event rather than the event (the streamed text, the prompt's progress).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, NamedTuple

from PySide6.QtCore import QObject, Signal, SignalInstance

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import Loaded, ToolPickChanged
from vllmchat.core.app.voice.events import PartialTranscript, SpokenPiece
from vllmchat.core.conversations.events import (
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
from vllmchat.core.tools.events import ToolCallFinished
from vllmchat.core.tuning.events import PointMeasured
from vllmchat.ui.window.bridge.event_table import event_types, signal_name

log = logging.getLogger(__name__)


class FieldSignal(NamedTuple):
    """A signal that carries fields of an event (with their Qt types), not the event."""

    event_type: type
    fields: tuple[str, ...]
    qt_types: tuple[type, ...]


FIELD_SIGNALS: dict[str, FieldSignal] = {
    "token_received": FieldSignal(TokenEvent, ("text",), (str,)),
    "prefill_progress": FieldSignal(PrefillProgressEvent, ("done", "total"), (int, int)),
    "stats_ready": FieldSignal(StatsEvent, ("stats",), (object,)),
    "thinking_received": FieldSignal(ThinkingEvent, ("text",), (str,)),
    "thought_for": FieldSignal(ThoughtFor, ("seconds",), (float,)),
}
"""Emitted along with the event's own signal, for the slots that take the fields."""

OLD_NAMES: dict[str, type] = {
    "load_finished": Loaded,
    "prompt_planned": PromptPlanEvent,
    "summary_changed": SummaryEvent,
    "turn_finished": DoneEvent,
    "turn_failed": ErrorEvent,
    "tune_point": PointMeasured,
    "call_finished": ToolCallFinished,
    "pick_changed": ToolPickChanged,
}
"""Older names of some events' signals: the same signal under a second name."""

STREAMED: frozenset[type] = frozenset(
    {
        TokenEvent,
        PrefillProgressEvent,
        StatsEvent,
        ThinkingEvent,
        ThoughtFor,
        PartialTranscript,
        SpokenPiece,
    }
)
"""Many per turn, and none changes the application's state: no snapshot before them."""


def _signal_names() -> dict[str, type]:
    """Each event type's signal name; a name a field signal holds gets ``_event``."""
    names: dict[str, type] = {}
    for event_type in event_types():
        name = signal_name(event_type)
        if name in FIELD_SIGNALS or name in OLD_NAMES:
            name += "_event"
        if name in names:
            raise TypeError(f"{names[name].__name__} and {event_type.__name__} both signal {name}")
        names[name] = event_type
    return names


SIGNALS: dict[str, type] = _signal_names()
"""Each generated signal's name, and the event type it carries."""


def _old_name(new: str, event_type: type) -> property:
    return property(lambda self: getattr(self, new), doc=f"``{event_type.__name__}``: `{new}`.")


def _signals_class() -> Any:
    """A QObject class with the generated signals (Qt takes signals only as class
    attributes, when the class is made)."""
    namespace: dict[str, object] = {name: Signal(object) for name in SIGNALS}
    namespace.update({name: Signal(*f.qt_types) for name, f in FIELD_SIGNALS.items()})
    new_names = {event_type: name for name, event_type in SIGNALS.items()}
    namespace.update({old: _old_name(new_names[t], t) for old, t in OLD_NAMES.items()})
    namespace["__doc__"] = "One signal per event type:\n\n" + "\n".join(
        f"- ``{name}``: ``{t.__name__}``, {(t.__doc__ or '').strip().splitlines()[0]}"
        for name, t in SIGNALS.items()
    )
    return type("EventSignals", (QObject,), namespace)


EventSignals: Any = _signals_class()


class AppEvents(EventSignals):  # type: ignore[misc]  # its signals are made at run time
    """The events' signals (``EventSignals``'s docstring lists them) and the snapshot's."""

    snapshot_changed = Signal(object)
    """``AppSnapshot``: what the GUI thread may read, as of the events that follow."""

    def __init__(self, app: ChatApp) -> None:
        super().__init__()
        self.app = app
        self._published = app.snapshot()
        self._recent: deque[object] = deque(maxlen=64)  # announced once, however handed in
        self._lock = threading.Lock()
        self._signals: dict[type, SignalInstance] = {
            event_type: getattr(self, name) for name, event_type in SIGNALS.items()
        }
        self._fields: dict[type, tuple[SignalInstance, tuple[str, ...]]] = {
            f.event_type: (getattr(self, name), f.fields) for name, f in FIELD_SIGNALS.items()
        }

    @property
    def tools(self) -> AppEvents:
        """The tool events' signals: this object's own (the name of their old group)."""
        return self

    def signal(self, event_type: type) -> SignalInstance:
        """The signal that carries events of ``event_type``."""
        return self._signals[event_type]

    def publish_snapshot(self, *_: object) -> None:
        """Emit the application layer's snapshot when it changed (on the engine's thread)."""
        snapshot = self.app.snapshot()
        if snapshot != self._published:
            self._published = snapshot
            self.snapshot_changed.emit(snapshot)

    def publish_from_engine(self, event: object) -> None:
        """On the engine's thread: the snapshot as of this event, then the event."""
        if event is not None and type(event) not in STREAMED:
            self.publish_snapshot()
        self.publish(event)

    def hear(self, event: object) -> None:
        """An owner's listener: publish what it tells (on the thread it tells it on)."""
        self.publish(event)

    def publish(self, event: object) -> bool:
        """Emit the signal of this event's type (on any thread); False for anything else
        (a call's return value that is no event)."""
        signal = self._signals.get(type(event))
        if signal is None:
            if event is not None:
                log.debug("no signal for %r", type(event))
            return False
        if type(event) not in STREAMED and self._seen(event):
            return True
        fields = self._fields.get(type(event))
        if fields is not None:
            field_signal, names = fields
            field_signal.emit(*(getattr(event, name) for name in names))
        signal.emit(event)
        return True

    def _seen(self, event: object) -> bool:
        """Whether this very event was published already (an intent's answer that its
        owner told its listeners too); notes it if not."""
        with self._lock:
            if any(seen is event for seen in self._recent):
                return True
            self._recent.append(event)
            return False
