"""Who hears an owner's changes: listeners called in the changing thread, safely."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

_log = logging.getLogger(__name__)

E = TypeVar("E")


class Listeners(Generic[E]):
    """An owner's listeners: each is told every change, in the thread that made it; a
    listener that fails is logged and never breaks the change or the other listeners."""

    def __init__(self, what: str) -> None:
        self._what = what  # named in the log when a listener fails
        self._listeners: list[Callable[[E], None]] = []
        self._guard = threading.Lock()

    def subscribe(self, listener: Callable[[E], None]) -> Callable[[], None]:
        """Call ``listener`` after every change; returns the call that unsubscribes it."""
        with self._guard:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._guard:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def __len__(self) -> int:
        """How many listen now."""
        with self._guard:
            return len(self._listeners)

    def tell(self, event: E) -> None:
        """Tell every listener ``event``."""
        with self._guard:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # a front end's failure never breaks a change
                _log.exception("A %s listener failed", self._what)
