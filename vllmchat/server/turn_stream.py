"""A turn of the application run on its own thread, read from the server's event loop.

The engine's turn blocks; the server's loop must not. ``TurnStream`` runs
``ApiService.chat`` on a thread and hands its events to the loop one by one. When
the client leaves, ``cancel`` stops the engine's turn within one token (or takes
the request out of the queue, when it was still waiting), so the next one starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from typing import Any, ClassVar

from vllmchat.core.app.engine_queue import GaveUp, Holder, QueueFull
from vllmchat.core.app.serving.api_turn import ApiChat, ApiDone, ApiEvent, ApiFailed, ApiText
from vllmchat.core.app.serving.models_on_offer import OfferedModel
from vllmchat.core.app.serving.service import ApiService
from vllmchat.core.engine.events import ErrorKind
from vllmchat.server.errors import ApiError, not_served

_log = logging.getLogger(__name__)
_END = object()


class TurnStream:
    """``async for event in TurnStream(...)``: the turn's events, ending after the last."""

    running: ClassVar[weakref.WeakSet[TurnStream]] = weakref.WeakSet()  # not yet ended

    def __init__(self, service: ApiService, request: ApiChat, model: OfferedModel | None) -> None:
        self.service, self.chat = service, request
        self.started = time.monotonic()
        self.sent_chars = 0  # of the reply, read by the route
        self.ended = False  # its last event (an answer or a failure) was read
        self.loop = asyncio.get_running_loop()
        self.items: asyncio.Queue[Any] = asyncio.Queue()
        self.left = threading.Event()  # the client went away
        self.holder: Holder | None = None
        self.finished = threading.Event()
        TurnStream.running.add(self)
        threading.Thread(
            target=self._run, args=(request, model), name="vllmchat-api-turn", daemon=True
        ).start()

    def _started(self, holder: Holder) -> None:
        self.holder = holder

    def _run(self, request: ApiChat, model: OfferedModel | None) -> None:
        try:
            events = self.service.chat(
                request, model, gave_up=self.left.is_set, started=self._started
            )
            for event in events:
                self._put(event)
                if self.left.is_set():
                    close = getattr(events, "close", None)
                    if close is not None:
                        close()
                    break
        except (QueueFull, GaveUp) as exc:
            self._put(not_served(exc))
        except Exception as exc:  # every request ends in an answer
            _log.error("An API turn failed", exc_info=exc)
            self._put(ApiFailed(ErrorKind.INTERNAL, f"The turn failed: {exc!r}"))
        finally:
            self.finished.set()
            self._put(_END)

    def _put(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the server stopped
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> ApiEvent | ApiError:
        item = await self.items.get()
        if item is _END:
            raise StopAsyncIteration
        result: ApiEvent | ApiError = item
        if isinstance(result, ApiText):
            self.sent_chars += len(result.text)
        self.ended = self.ended or isinstance(result, ApiDone | ApiFailed | ApiError)
        return result

    def cancel(self) -> None:
        """The client left: stop the turn now, or leave the queue."""
        if self.finished.is_set():
            return
        self.left.set()
        if self.holder is not None:
            self.service.stop(self.holder)


def end_turns_of(service: ApiService) -> None:
    """The server stops: its turns that wait or run end now (their clients are gone)."""
    for turn in list(TurnStream.running):
        if turn.service is service:
            turn.cancel()
