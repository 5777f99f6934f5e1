"""The GUI's handle on the application layer: an intent of ``ChatApp`` is run as a
``Worker`` on the engine's pool of one thread (one engine, one thread, calls in the
order asked), and each event it yields comes out as its type's signal on the GUI thread.

``run(app.open_model, path)`` is the one way to run an intent there; ``run_turn`` is
the same for a turn (a title or a summary made ahead gives way to it) and
``run_ahead`` for work done while the user reads. The events are published from the
engine's thread as they are yielded (a direct connection), so they keep their order;
an intent that raises ends in an ``ErrorEvent`` the window shows, with the engine's
kind of failure and its fix when it is one. ``stop()`` is safe from the GUI thread:
it sets the session's flag, checked per token in the engine process.

The GUI thread never reaches into the application layer's objects: it reads
``snapshot`` (settings, capabilities, model, machine), which the engine's thread
publishes before each event that may follow a change, and it sends intents. The
user's quick changes to stored conversations (rename, pin, a summary, import) are
made at once on the calling thread (``apply``); every change the conversations'
owner tells, and every step of the tools service, from any thread, is published as
its signal. The voice's work runs through ``voice`` (``VoiceRunner``): listening, a
sentence tried and a turn's reply spoken (when the settings ask for it) run on the
background pool; a turn hands its reply's text to the voice as it streams, and the
engine's thread is free at the turn's end, however long the reply takes to be said.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar

from PySide6.QtCore import QObject, Qt, QThreadPool, QTimer

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import ConversationCreated, EditRefused
from vllmchat.core.app.snapshot import AppSnapshot
from vllmchat.core.engine.events import EngineError, ErrorEvent, ErrorKind
from vllmchat.ui.common.workers import Worker, WorkerGroup, work_name
from vllmchat.ui.window.bridge.app_events import AppEvents
from vllmchat.ui.window.bridge.voice_runner import VoiceRunner

P = ParamSpec("P")
R = TypeVar("R")
How = Literal["run", "turn", "ahead", "now"]


class OldName:
    """An older method name of the bridge: one intent of the application layer, at
    ``path`` on ``ChatApp``, run as ``how`` says, with ``fixed`` keyword arguments."""

    def __init__(self, path: str, how: How = "run", **fixed: Any) -> None:
        self.path, self.how, self.fixed = path, how, fixed

    def __get__(self, bridge: EngineBridge | None, owner: type | None = None) -> Any:
        if bridge is None:
            return self
        return functools.partial(bridge.run_as, self.how, self.path, **self.fixed)


class EngineBridge(QObject):
    """Runs ``ChatApp`` intents on the engine's thread; its ``events`` signal on the GUI
    thread, and ``snapshot`` is what the GUI thread knows of the application layer."""

    def __init__(
        self,
        app: ChatApp | Any,
        kv: Any = None,
        parent: QObject | None = None,
        *,
        settings: Any = None,
        persist: Any = None,
        engine: Any = None,
    ) -> None:
        """``app``: the application layer to run. In the older form ``app`` is the
        conversation store, and the application is made here from it, ``kv``,
        ``settings``, ``persist`` and ``engine``."""
        super().__init__(parent)
        if not isinstance(app, ChatApp):
            app = ChatApp(app, kv, settings, engine=engine, persist=persist)
        self.app: ChatApp = app
        self.snapshot: AppSnapshot = self.app.snapshot()
        self.events = AppEvents(self.app)
        self.events.snapshot_changed.connect(self._on_snapshot)
        self._unsubscribe = self.app.conversations.subscribe(self.events.hear)
        self.app.tools.subscribe(self.events.hear)  # servers, approvals, calls
        self.pool = QThreadPool(self)  # the engine's one thread, for the engine's life
        self.pool.setObjectName("vllmchat-engine")
        self.pool.setMaxThreadCount(1)
        self.pool.setExpiryTimeout(-1)
        self.jobs = WorkerGroup(self, pool=self.pool)
        self.voice = VoiceRunner(self.app, self.events, self)
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

    # -- running intents -----------------------------------------------------------------
    def run(
        self, intent: Callable[P, object], /, *args: P.args, **kwargs: P.kwargs
    ) -> Worker | None:
        """Run ``intent(*args, **kwargs)`` on the engine's thread; what it yields (or
        returns) becomes signals, and an exception an ``ErrorEvent``. None once closed:
        an intent the window's last events ask for (a title after the last reply) is
        not run."""
        if self._closed:
            return None
        job = functools.partial(intent, *args, **kwargs)
        name = work_name(job)
        worker = Worker(job, functools.partial(self._failed, name), name=name)
        direct = Qt.ConnectionType.DirectConnection
        worker.yielded.connect(self.events.publish_from_engine, direct)
        worker.returned.connect(self.events.publish_from_engine, direct)
        worker.returned.connect(self.events.publish_snapshot, direct)
        worker.errored.connect(self.events.publish_snapshot, direct)
        return self.jobs.start(worker)

    call = run  # its older name

    def run_turn(
        self, intent: Callable[P, object], /, *args: P.args, **kwargs: P.kwargs
    ) -> Worker | None:
        """Run a turn (a message, a regeneration, an edit): from now until it starts,
        work done ahead gives way to it. Its reply is spoken where the settings say so
        (on the background pool: the turn ends when its last token is in)."""
        self.turn_waiting.set()
        return self.run(self.voice.spoken(intent), *args, **kwargs)

    def run_ahead(
        self, intent: Callable[..., object], /, *args: Any, **kwargs: Any
    ) -> Worker | None:
        """Run work done while the user reads (a title, the next turn's summary): it is
        given ``busy``, true once a turn waits, and stops within a token."""
        return self.run(intent, *args, busy=self.turn_waiting.is_set, **kwargs)

    def apply(self, intent: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Make a quick change to the stored conversations on this thread (the store
        serialises its writes); its event is published, and returned."""
        event = intent(*args, **kwargs)
        self.events.publish(event)
        return event

    def run_as(self, how: How, path: str, /, *args: Any, **kwargs: Any) -> object:
        """Run the intent at ``path`` on the application (``"conversations.rename"``) as
        ``how`` says: ``run``, ``turn``, ``ahead`` or ``now`` (``apply``)."""
        intent = operator.attrgetter(path)(self.app)
        runner: dict[How, Callable[..., object]] = {
            "run": self.run,
            "turn": self.run_turn,
            "ahead": self.run_ahead,
            "now": self.apply,
        }
        return runner[how](intent, *args, **kwargs)

    def _failed(self, name: str, exc: Exception) -> None:
        if isinstance(exc, EngineError):  # its kind says which fix applies
            self.events.publish(ErrorEvent(exc.kind, exc.message, precise_fix=exc.fix))
        else:
            self.events.publish(ErrorEvent(ErrorKind.INTERNAL, f"{name} failed: {exc!r}"))

    # -- older names, one intent each, until the window calls ``run`` itself -------------
    start = OldName("start")
    open_model = OldName("open_model")
    use_server = OldName("use_server")
    set_placement = OldName("set_placement")
    configure = OldName("configure")
    restart = OldName("restart")
    open_conversation = OldName("open_conversation")
    attach = OldName("attaching.attach")
    detach = OldName("attaching.detach")
    summarize = OldName("summarize")
    apply_tune = OldName("tuning.apply_tune")
    delete_conversation = OldName("delete_conversation")
    send = OldName("send", "turn")
    regenerate = OldName("regenerate", "turn")
    edit = OldName("edit", "turn")
    make_title = OldName("reading.make_title", "ahead", after_first_reply=True)
    prepare_next = OldName("reading.prepare_next", "ahead")
    rename_conversation = OldName("conversations.rename", "now")
    pin_message = OldName("conversations.pin", "now")
    edit_summary = OldName("conversations.edit_summary", "now")
    import_conversation = OldName("conversations.import_file", "now")

    @classmethod
    def old_names(cls) -> dict[str, OldName]:
        """The older method names still kept, and the intent each one runs."""
        return {name: value for name, value in vars(cls).items() if isinstance(value, OldName)}

    # -- what is not an intent run on the engine's thread ------------------------------
    def stop(self) -> None:
        """Stop the turn in progress within a token (from any thread)."""
        self.app.stop()

    def tune(self, budget_s: float, *, fresh: bool = False) -> None:
        """Measure GPU layers and threads (``stop_tune`` ends it within a token)."""
        self._tune_stop.clear()
        self.run(self.app.tuning.tune, budget_s, fresh=fresh, should_stop=self._tune_stop.is_set)

    def stop_tune(self) -> None:
        self._tune_stop.set()
        self.app.tuning.stop_tune()

    def new_conversation(self) -> ConversationCreated | EditRefused:
        """A new conversation with the settings' system prompt (announced, and returned)."""
        return self.apply(self.app.edits.create, system_prompt=self.snapshot.settings.system_prompt)

    def _on_snapshot(self, snapshot: AppSnapshot) -> None:
        self.snapshot = snapshot

    def _on_turn_started(self, _event: object) -> None:
        self.turn_waiting.clear()

    def _check_alive(self) -> None:
        """Report an engine that died while idle."""
        if not self.busy:
            self.run(self.app.watch)

    def close(self) -> None:
        """Stop, save the KV state, end the engine process and the thread (once)."""
        if self._closed:
            return
        self._timer.stop()
        self.voice.close()  # recordings listened to are dropped, speaking stops
        self.stop()  # the turn in progress ends within a token, its reply kept
        self.jobs.skip_queued()  # titles and summaries asked for after the last reply
        self.run(self.app.shutdown)
        self._closed = True
        self.jobs.wait(60_000)
        self.pool.waitForDone(1_000)  # the thread ends with the calls
        self._unsubscribe()
        self.app.tools.unsubscribe(self.events.hear)
        self.snapshot = self.app.snapshot()  # the engine's thread has ended: the last word
