"""One queue in front of the engine: the window's turns and the API's requests take
turns, first come first served, and anyone can see who runs and who waits.

A turn holds the engine from ``hold`` until its ``with`` block ends. The queue is
bounded: a request that finds ``limit`` others waiting is refused at once with
``QueueFull`` (the API answers 429), and a waiter that gives up (its client left, or
its wait timed out) leaves its place.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from vllmchat.core.listeners import Listeners

WINDOW = "window"  # the window's and the terminal's own turns
API = "api"  # a request of the local API


@dataclass(frozen=True)
class Holder:
    """A turn in the queue: who asked (``source``), for which client, and since when."""

    ticket: int
    source: str
    client: str
    label: str
    since: float  # time.monotonic() when it joined


@dataclass(frozen=True)
class QueueChanged:
    """Who holds the engine now, and who waits, in order."""

    running: Holder | None
    waiting: tuple[Holder, ...]


@dataclass(frozen=True)
class Switched:
    """The engine passed from one holder to the next (told in the new holder's thread,
    before its work starts)."""

    before: Holder | None
    holder: Holder


class QueueFull(Exception):
    """Too many wait already; try again after ``retry_after_s``."""

    def __init__(self, waiting: int, retry_after_s: int) -> None:
        super().__init__(f"{waiting} requests wait for the model; retry in {retry_after_s} s.")
        self.waiting = waiting
        self.retry_after_s = retry_after_s


class GaveUp(Exception):
    """A waiter left the queue before its turn (its client left, or it waited too long)."""


class EngineQueue:
    """First come, first served turns on the engine; ``limit`` waiters at most."""

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit
        self.changes: Listeners[QueueChanged] = Listeners("engine queue")
        self.switches: Listeners[Switched] = Listeners("engine switch")
        self._cond = threading.Condition()
        self._waiting: deque[Holder] = deque()
        self._running: Holder | None = None
        self._last: Holder | None = None  # who held the engine last
        self._tickets = itertools.count(1)
        self._turn_s = 5.0  # a running average of a turn's length (for Retry-After)

    def snapshot(self) -> QueueChanged:
        with self._cond:
            return QueueChanged(self._running, tuple(self._waiting))

    @contextmanager
    def hold(
        self,
        source: str,
        client: str,
        label: str = "",
        *,
        timeout_s: float | None = None,
        gave_up: Callable[[], bool] = lambda: False,
    ) -> Iterator[Holder]:
        """Wait for the engine, hold it for the block, pass it on.

        ``QueueFull`` when ``limit`` wait already (the window's own turns are never
        refused); ``GaveUp`` when ``gave_up()`` turns true or ``timeout_s`` passes first.
        """
        holder = self._join(source, client, label)
        try:
            self._wait_for_turn(holder, timeout_s, gave_up)
        except GaveUp:
            self._leave(holder)
            raise
        started = time.monotonic()
        self.switches.tell(Switched(self._last, holder))
        try:
            yield holder
        finally:
            self._finish(holder, time.monotonic() - started)

    def _join(self, source: str, client: str, label: str) -> Holder:
        with self._cond:
            if source != WINDOW and len(self._waiting) >= self.limit:
                raise QueueFull(len(self._waiting), self.retry_after_s())
            holder = Holder(next(self._tickets), source, client, label, time.monotonic())
            self._waiting.append(holder)
            snapshot = QueueChanged(self._running, tuple(self._waiting))
        self.changes.tell(snapshot)
        return holder

    def _wait_for_turn(
        self, holder: Holder, timeout_s: float | None, gave_up: Callable[[], bool]
    ) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._running is not None or self._waiting[0] is not holder:
                if gave_up() or (deadline is not None and time.monotonic() >= deadline):
                    raise GaveUp()
                self._cond.wait(0.05)
            self._waiting.popleft()
            self._running = holder
            snapshot = QueueChanged(holder, tuple(self._waiting))
        self.changes.tell(snapshot)

    def _leave(self, holder: Holder) -> None:
        with self._cond:
            if holder in self._waiting:
                self._waiting.remove(holder)
            self._cond.notify_all()
            snapshot = QueueChanged(self._running, tuple(self._waiting))
        self.changes.tell(snapshot)

    def _finish(self, holder: Holder, seconds: float) -> None:
        with self._cond:
            self._running = None
            self._last = holder
            self._turn_s = 0.8 * self._turn_s + 0.2 * seconds
            self._cond.notify_all()
            snapshot = QueueChanged(None, tuple(self._waiting))
        self.changes.tell(snapshot)

    def retry_after_s(self) -> int:
        """Seconds until a place is likely free (at least 1)."""
        return max(1, round(self._turn_s))
