"""Run slow calls off the GUI thread and get the result back as a signal."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot


class _Call(QObject):
    finished = Signal(object)
    failed = Signal(object)

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__()
        self.fn = fn

    @Slot()
    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:  # delivered to the GUI as a value
            logging.getLogger(__name__).warning("A background call failed", exc_info=exc)
            self.failed.emit(exc)
        else:
            self.finished.emit(result)


class Workers(QObject):
    """Owns the threads it starts, so they can all be joined on close."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._running: list[tuple[QThread, _Call]] = []

    def run(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        thread = QThread()
        call = _Call(fn)
        call.moveToThread(thread)
        thread.started.connect(call.run)
        call.finished.connect(on_done)
        if on_error is not None:
            call.failed.connect(on_error)
        call.finished.connect(thread.quit)
        call.failed.connect(thread.quit)
        self._running.append((thread, call))
        thread.finished.connect(self._reap)
        thread.start()

    def _reap(self) -> None:
        self._running = [(t, c) for t, c in self._running if not t.isFinished()]

    def join(self, timeout_ms: int = 30000) -> None:
        for thread, _call in list(self._running):
            thread.quit()
            thread.wait(timeout_ms)
        self._running.clear()

    @property
    def busy(self) -> bool:
        return any(t.isRunning() for t, _ in self._running)
