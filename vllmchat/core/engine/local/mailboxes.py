"""The engine's answers sorted by request id, so that several callers (the window's
turn, API clients' turns, quick calls) wait on one pipe at once.

Whoever waits and finds its box empty reads the next message from the pipe, unless
another caller is reading already, and puts it in its box; the others wait on a
condition. A failure no request owns (an unreadable request) and the process's end
reach every box.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import EngineError


class _Ended:
    """The process ended: every open box gets its error."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class Mailboxes:
    """One box per request id in flight."""

    def __init__(self, recv: Callable[[], Any]) -> None:
        self.recv = recv  # the pipe's next message (``EngineProcess.recv``)
        self._boxes: dict[int, deque[Any]] = {}
        self._cond = threading.Condition()
        self._reading = False

    def open(self, rid: int) -> None:
        """A box for ``rid`` (before its request is sent)."""
        with self._cond:
            self._boxes[rid] = deque()

    def close(self, rid: int) -> None:
        """No more messages for ``rid`` are wanted (later ones are dropped)."""
        with self._cond:
            self._boxes.pop(rid, None)

    def next(self, rid: int) -> Any:
        """The next message for ``rid``; the process's end raises its ``EngineError``."""
        while True:
            with self._cond:
                while True:
                    box = self._boxes.get(rid)
                    if box is None:
                        raise RuntimeError(f"no box is open for request {rid}")
                    if box:
                        message = box.popleft()
                        if isinstance(message, _Ended):
                            raise message.error
                        return message
                    if not self._reading:
                        self._reading = True
                        break
                    self._cond.wait(0.05)
            try:
                message = self.recv()
            except EngineError as exc:
                message = _Ended(exc)
            except BaseException:
                with self._cond:
                    self._reading = False
                    self._cond.notify_all()
                raise
            with self._cond:
                self._reading = False
                self._sort(message)
                self._cond.notify_all()

    def _sort(self, message: Any) -> None:
        """Put ``message`` in its box (its id is a tuple's second item, or ``rid``)."""
        if isinstance(message, _Ended) or (
            isinstance(message, rq.Failure) and message.rid == rq.UNREAD
        ):
            for box in self._boxes.values():
                box.append(message if isinstance(message, _Ended) else _Ended(message.error))
            return
        if type(message) is tuple and message[0] == "tokset":  # several turns' tokens
            for turn, tokens in _by_turn(message[2]).items():
                kept = self._boxes.get(turn)
                if kept is not None:
                    kept.append(("toks", turn, tokens))
            return
        rid = message[1] if type(message) is tuple else getattr(message, "rid", None)
        found = self._boxes.get(rid) if isinstance(rid, int) else None
        if found is not None:
            found.append(message)


def _by_turn(tokens: list[tuple[int, str, int]]) -> dict[int, list[tuple[str, int]]]:
    """``[(rid, text, id), ...]`` as each turn's ``[(text, id), ...]``, in order."""
    out: dict[int, list[tuple[str, int]]] = {}
    for rid, text, token in tokens:
        out.setdefault(rid, []).append((text, token))
    return out
