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

from PySide6.QtCore import QObject, Qt, QThreadPool, QTimer

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import ConversationCreated, ConversationEdit, EditRefused
from vllmchat.core.app.settings_model import Persist
from vllmchat.core.app.snapshot import AppSnapshot
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import ErrorEvent, ErrorKind
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.placement import Placement
from vllmchat.core.tuning.results import TuneConfig
from vllmchat.ui.common.workers import Worker, WorkerGroup, work_name
from vllmchat.ui.window.bridge.app_events import AppEvents


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
