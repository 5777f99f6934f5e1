"""The one way the window runs work off the GUI thread: a ``Worker``.

A worker calls its function on a thread pool. When the function returns a
generator, the worker steps through it: each value it yields comes out as
``yielded``, and ``quit()`` sets a flag checked before every step, so the work
stops at its next yield (the generator is closed, its ``finally`` runs) and
``aborted`` is emitted. Every worker ends in exactly one of ``returned`` (the
return value), ``errored`` (the exception, also logged) or ``aborted``, and
``finished`` follows any of them. The failure handler is a required argument:
no failure goes unseen.

The model is superqt's ``GeneratorWorker``. It is written here rather than
depended on because superqt takes a ``RuntimeError`` raised by the work for a
deleted worker and only warns (no ``errored``, no ``finished``), and the
engine's ``EngineError`` is a ``RuntimeError``; it also closes the generator on
abort (superqt leaves it to the garbage collector, on whichever thread).

Signals reach slots on the GUI thread (the worker lives there), unless a
connection asks for ``DirectConnection``, as the engine bridge does to publish
events in order from the engine's thread. Only values cross threads: the work is
a function with its arguments bound on the GUI thread (``functools.partial``),
its results and failures come back as signals, and the work never reads a widget.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import ClassVar

from PySide6.QtCore import QObject, QThreadPool, Signal, Slot

log = logging.getLogger(__name__)

_ABORTED = object()
_pool: QThreadPool | None = None


def background_pool() -> QThreadPool:
    """The pool for the window's background calls: hub look-ups, downloads, checks.

    More threads than cores: these calls mostly wait on the disk or the network.
    """
    global _pool
    if _pool is None:
        _pool = QThreadPool()
        _pool.setObjectName("vllmchat-workers")
        _pool.setMaxThreadCount(8)
    return _pool


def work_name(work: Callable[[], object]) -> str:
    """What a failure message calls the work: its function's name, in words."""
    fn = getattr(work, "func", work)  # functools.partial
    name = str(getattr(fn, "__name__", "The operation"))
    return "The operation" if name == "<lambda>" else name.strip("_").replace("_", " ").capitalize()


class Worker(QObject):
    """Runs ``work()`` once on a pool thread; see the module's docstring."""

    yielded = Signal(object)
    """A value the work yielded, in order."""
    returned = Signal(object)
    """The work's return value (a generator's ``return`` value, None if it has none)."""
    errored = Signal(object)
    """The exception the work raised (it is logged too)."""
    aborted = Signal()
    """``quit()`` was honoured: the work stopped at a step and was closed."""
    finished = Signal()
    """After ``returned``, ``errored`` or ``aborted``: re-enable what waited for it."""
    _ended = Signal()

    _live: ClassVar[set[Worker]] = set()  # started, until the GUI thread has let go

    def __init__(
        self,
        work: Callable[[], object],
        on_error: Callable[[Exception], object],
        *,
        name: str = "",
    ) -> None:
        super().__init__()
        if not callable(on_error):
            raise TypeError("a worker needs a failure handler that shows the failure")
        self.work: Callable[[], object] | None = work  # let go of once run
        self.name = name or work_name(work)
        self._abort = threading.Event()
        self._began = threading.Event()
        self._done = threading.Event()
        self._released = threading.Event()  # the pool thread holds no reference any more
        self._started = False
        self.errored.connect(on_error)
        self._ended.connect(self._forget)

    # -- from the GUI thread -------------------------------------------------------------
    def start(self, pool: QThreadPool | None = None) -> Worker:
        """Queue the work on ``pool`` (the window's background pool by default)."""
        if self._started:
            raise RuntimeError(f"{self.name}: a worker runs once")
        self._started = True
        Worker._live.add(self)
        holder = [self]
        (pool or background_pool()).start(functools.partial(_run_from, holder))
        return self

    def quit(self) -> None:
        """Ask the work to stop at its next step (safe from any thread)."""
        self._abort.set()

    @property
    def abort_requested(self) -> bool:
        return self._abort.is_set()

    @property
    def running(self) -> bool:
        """Started (maybe still queued) and not yet ended."""
        return self._started and not self._done.is_set()

    @property
    def queued(self) -> bool:
        """Started, but waiting for a thread of its pool."""
        return self._started and not self._began.is_set()

    def wait(self, timeout_ms: int | None = None) -> bool:
        """Block until the work has ended; False if ``timeout_ms`` passed first."""
        if not self._started:
            return True
        return self._done.wait(None if timeout_ms is None else timeout_ms / 1000)

    @classmethod
    def running_workers(cls) -> list[Worker]:
        """Workers whose work has not ended (the tests fail on any left over)."""
        return [w for w in list(cls._live) if w.running]

    @Slot()
    def _forget(self) -> None:
        # On the GUI thread, once the pool thread has let go: the QObject is always
        # deleted on the thread it lives in.
        self._released.wait(5)
        Worker._live.discard(self)

    # -- on the pool thread ---------------------------------------------------------------
    def _run(self) -> None:
        self._began.set()
        try:
            outcome = self._outcome()
        except Exception as exc:  # every failure is an ending, shown by on_error
            log.warning("%s failed: %s", self.name, exc, exc_info=exc)
            self.errored.emit(exc)
        else:
            if outcome is _ABORTED:
                self.aborted.emit()
            else:
                self.returned.emit(outcome)
        finally:
            self._done.set()  # not running any more, as seen from the slots of finished
            self.finished.emit()
            self._ended.emit()

    def _outcome(self) -> object:
        work, self.work = self.work, None  # no cycle through a closure that names the worker
        if work is None or self._abort.is_set():
            return _ABORTED
        result = work()
        if not isinstance(result, Generator):
            return result
        try:
            while True:
                if self._abort.is_set():
                    return _ABORTED
                try:
                    value = next(result)
                except StopIteration as stop:
                    return stop.value
                self.yielded.emit(value)
        finally:
            result.close()


def _run_from(holder: list[Worker]) -> None:
    worker = holder.pop()
    released = worker._released
    worker._run()
    del worker
    released.set()


class WorkerGroup(QObject):
    """The workers one widget starts: asked to stop and waited for together on close."""

    def __init__(self, parent: QObject | None = None, *, pool: QThreadPool | None = None):
        super().__init__(parent)
        self.pool = pool
        self._workers: list[Worker] = []

    def run(
        self,
        work: Callable[[], object],
        on_returned: Callable[..., object],
        on_error: Callable[[Exception], object],
        *,
        name: str = "",
    ) -> Worker:
        """Start ``work``; its result goes to ``on_returned``, a failure to ``on_error``."""
        worker = Worker(work, on_error, name=name)
        worker.returned.connect(on_returned)
        return self.start(worker)

    def start(self, worker: Worker) -> Worker:
        self._workers = [w for w in self._workers if w.running]
        self._workers.append(worker)
        return worker.start(self.pool)

    @property
    def busy(self) -> bool:
        return any(w.running for w in self._workers)

    def join(self, timeout_ms: int = 30_000) -> bool:
        """Ask every worker to stop at its next step and wait for them all."""
        for w in self._workers:
            w.quit()
        return self.wait(timeout_ms)

    def skip_queued(self) -> None:
        """Ask the workers still waiting for a thread not to run (they end aborted)."""
        for w in self._workers:
            if w.queued:
                w.quit()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Wait for every worker to end (without asking them to stop)."""
        deadline = time.monotonic() + timeout_ms / 1000
        ok = all(w.wait(max(0, int((deadline - time.monotonic()) * 1000))) for w in self._workers)
        self._workers = [w for w in self._workers if w.running]
        return ok
