"""A chat turn on the open conversation, from its start to the event it ends with.

``TurnRunner`` holds the engine's queue for the turn (the window's turns and the API's
take theirs in turn), passes the session's events on, and ends every turn in an event
the front end shows: a turn that ended the engine is handed to ``died`` (the app falls
back or reports it), a store that cannot be written is a storage error, and a completed
turn is checkpointed in the background, with a new disk problem told once.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator

from vllmchat.core.app.engine_queue import WINDOW, EngineQueue
from vllmchat.core.app.events import AppEvent, EditRefused, StorageWarning, TurnStarted
from vllmchat.core.app.open_session import OpenSession
from vllmchat.core.app.placement.placing import ABORTS
from vllmchat.core.conversations.events import SessionEvent
from vllmchat.core.conversations.store.store import StoreError
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import DoneEvent, EngineError, ErrorEvent, ErrorKind
from vllmchat.core.engine.protocol import Engine

_log = logging.getLogger(__name__)
Start = Callable[[ChatSession], Iterator[SessionEvent]]


class TurnRunner:
    """Send, regenerate, edit and summarize in the open conversation; stop; checkpoint."""

    def __init__(
        self,
        open_session: OpenSession,
        kv: KVStateCache,
        engine_queue: EngineQueue,
        *,
        engine: Callable[[], Engine],
        died: Callable[[ErrorKind, str], Iterator[AppEvent]],
        ran: Callable[[], None],
    ) -> None:
        """``died``: what follows a turn that ended the engine; ``ran``: a turn completed
        at the placement loaded."""
        self._open, self._kv, self._queue = open_session, kv, engine_queue
        self._engine, self._died, self._ran = engine, died, ran
        self._storage_reported: str | None = None  # the disk problem last told

    def send(self, text: str) -> Iterator[AppEvent]:
        """A user message and its reply; a pending new chat is stored first (where it
        cannot be, the turn is not started and the chat stays pending)."""
        for event in self._open.stored_pending():
            yield event
            if isinstance(event, EditRefused):
                yield ErrorEvent(
                    ErrorKind.STORAGE,
                    f"The message was not sent: {event.message}",
                    precise_fix="",
                )
                return
        yield from self.run(lambda s: s.send(text))

    def run(self, start: Start) -> Iterator[AppEvent]:
        """The turn ``start`` begins in the open session, holding the engine's queue."""
        session = self._open.session
        if session is None:
            yield ErrorEvent(ErrorKind.BAD_REQUEST, "No conversation is open.")
            return
        key = f"conversation-{session.conversation_id}"
        with self._queue.share(WINDOW, key, "a chat turn"):
            yield from self._held(session, start)

    def _held(self, session: ChatSession, start: Start) -> Iterator[AppEvent]:
        yield TurnStarted(session.conversation_id)
        completed, ended = False, None
        try:
            for event in start(session):
                yield event
                if isinstance(event, ErrorEvent):  # the engine process logged its traceback
                    _log.warning("The turn failed: %s (%s)", event.message, event.kind.value)
                if isinstance(event, ErrorEvent) and event.kind in ABORTS:
                    ended = event  # handled once the turn's stream (and its lock) is done
                completed = completed or isinstance(event, DoneEvent)
            if ended is not None:
                yield from self._died(ended.kind, ended.message)
        except EngineError as exc:
            _log.warning("The turn failed: %s", exc, exc_info=exc)
            yield ErrorEvent(exc.kind, exc.message)
            if exc.kind in ABORTS:
                yield from self._died(exc.kind, exc.message)
            return
        except (sqlite3.Error, StoreError, OSError) as exc:
            _log.error("The conversation could not be stored: %s", exc, exc_info=exc)
            yield ErrorEvent(ErrorKind.STORAGE, f"The conversation could not be stored: {exc}.")
            return
        except Exception as exc:  # every turn ends with an event the front end shows
            _log.error("The turn failed", exc_info=exc)
            yield ErrorEvent(ErrorKind.INTERNAL, f"The turn failed: {exc!r}")
            return
        if completed:
            self._ran()
            self.checkpoint()
            failure = self._kv.failure
            if failure is not None and failure != self._storage_reported:
                yield StorageWarning(failure)
            self._storage_reported = failure

    def stop(self) -> None:
        """Stop the reply or summary in progress (any thread; within one token)."""
        session = self._open.session
        if session is not None:
            session.stop()
        else:
            self._engine().stop()

    def checkpoint(self) -> int:
        """Save the conversation's KV state in the background, so a crash loses little."""
        session, engine = self._open.session, self._engine()
        if session is None or not engine.alive:
            return 0
        return self._kv.save(engine, session.conversation_id, background=True)
