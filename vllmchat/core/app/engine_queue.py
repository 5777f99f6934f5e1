"""One queue in front of the engine: who runs on it, who waits, first come first
served, and anyone can see both.

``hold`` takes the engine alone (a load, a measurement) until its ``with`` block
ends. ``share`` runs beside others: the window's turn in its own sequence at once,
an API turn in one of ``slots`` sequences (batched by the engine), else it waits.
An ``hold`` waits for the shares to end, and later shares wait behind it. The queue
is bounded: an API request that finds ``limit`` others waiting is refused at once
with ``QueueFull`` (the API answers 429), and a waiter that gives up (its client
left, or its wait timed out) leaves its place.
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
    shared: bool = False  # runs beside other shares (a turn in its own sequence)


@dataclass(frozen=True)
class QueueChanged:
    """Who holds the engine now (alone, or the first of the shares), who waits, in
    order, and every turn running beside others."""

    running: Holder | None
    waiting: tuple[Holder, ...]
    sharing: tuple[Holder, ...] = ()


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
        self._sharing: list[Holder] = []  # turns running beside each other
        self._slots: dict[int, int] = {}  # a waiting share's ticket -> the API slots then
        self._last: Holder | None = None  # who held the engine last
        self._tickets = itertools.count(1)
        self._turn_s = 5.0  # a running average of a turn's length (for Retry-After)

    def snapshot(self) -> QueueChanged:
        with self._cond:
            return self._snapshot()

    def _snapshot(self) -> QueueChanged:
        running = self._running or (self._sharing[0] if self._sharing else None)
        return QueueChanged(running, tuple(self._waiting), tuple(self._sharing))

    @contextmanager
    def share(
        self,
        source: str,
        client: str,
        label: str = "",
        *,
        slots: int = 1,
        timeout_s: float | None = None,
        gave_up: Callable[[], bool] = lambda: False,
    ) -> Iterator[Holder]:
        """Run beside the other shares for the block: the window's turn at once, an
        API turn while fewer than ``slots`` API turns run (else it waits its turn).
        ``QueueFull`` and ``GaveUp`` as ``hold``."""
        holder = self._join(source, client, label, shared=True)
        with self._cond:
            self._slots[holder.ticket] = max(1, slots)
        try:
            self._wait_for_turn(holder, timeout_s, gave_up)
        except GaveUp:
            self._leave(holder)
            raise
        finally:
            with self._cond:
                self._slots.pop(holder.ticket, None)
        started = time.monotonic()
        try:
            yield holder
        finally:
            self._finish(holder, time.monotonic() - started)

    def _may_start(self, holder: Holder) -> bool:
        """Whether ``holder`` (waiting) may start now: nothing alone runs, no one alone
        waits ahead; an API share also waits for a slot and for the shares ahead."""
        if self._running is not None:
            return False
        ahead = list(itertools.takewhile(lambda h: h is not holder, self._waiting))
        if not holder.shared:
            return not ahead and not self._sharing
        if any(not h.shared for h in ahead):
            return False
        if holder.source == WINDOW:
            return True
        if any(h.source != WINDOW for h in ahead):
            return False
        api = sum(1 for h in self._sharing if h.source != WINDOW)
        return api < self._slots.get(holder.ticket, 1)

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
        try:
            yield holder
        finally:
            self._finish(holder, time.monotonic() - started)

    def _join(self, source: str, client: str, label: str, *, shared: bool = False) -> Holder:
        with self._cond:
            waiting = sum(1 for h in self._waiting if h.source != WINDOW)
            if source != WINDOW and waiting >= self.limit:
                raise QueueFull(waiting, self.retry_after_s())
            ticket = next(self._tickets)
            holder = Holder(ticket, source, client, label, time.monotonic(), shared)
            self._waiting.append(holder)
            snapshot = self._snapshot()
        self.changes.tell(snapshot)
        return holder

    def _wait_for_turn(
        self, holder: Holder, timeout_s: float | None, gave_up: Callable[[], bool]
    ) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while not self._may_start(holder):
                if gave_up() or (deadline is not None and time.monotonic() >= deadline):
                    raise GaveUp()
                self._cond.wait(0.05)
            self._waiting.remove(holder)
            if holder.shared:
                self._sharing.append(holder)
            else:
                self._running = holder
            before, self._last = self._last, holder
            snapshot = self._snapshot()
            self._cond.notify_all()
        self.changes.tell(snapshot)
        if not holder.shared:
            self.switches.tell(Switched(before, holder))

    def _leave(self, holder: Holder) -> None:
        with self._cond:
            if holder in self._waiting:
                self._waiting.remove(holder)
            self._cond.notify_all()
            snapshot = self._snapshot()
        self.changes.tell(snapshot)

    def _finish(self, holder: Holder, seconds: float) -> None:
        with self._cond:
            if holder.shared:
                self._sharing.remove(holder)
            else:
                self._running = None
            self._turn_s = 0.8 * self._turn_s + 0.2 * seconds
            self._cond.notify_all()
            snapshot = self._snapshot()
        self.changes.tell(snapshot)

    def retry_after_s(self) -> int:
        """Seconds until a place is likely free (at least 1)."""
        return max(1, round(self._turn_s))
