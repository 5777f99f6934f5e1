"""Work done while the user reads a reply: the conversation's title, and the summary
the next turn would need (with its prompt prefilled). Both give way within a token
to a turn that is waiting (``busy``)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator

from vllmchat.core.app.conversations.titling import title_conversation
from vllmchat.core.app.events import AppEvent, StorageWarning, TitleMade
from vllmchat.core.conversations.events import PrefilledAhead, SummaryEvent
from vllmchat.core.conversations.store.store import StoreError
from vllmchat.core.conversations.turns.background import (
    has_one_reply,
    summarize_ahead,
)
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import EngineError, Event
from vllmchat.core.engine.protocol import Engine

_log = logging.getLogger(__name__)


def _ready(engine: Engine) -> bool:
    return engine.alive and engine.info is not None


def title_made(
    session: ChatSession, engine: Engine, busy: Callable[[], bool], *, after_first_reply: bool
) -> Iterator[TitleMade]:
    """The model's title for ``session``'s conversation, or its first words when a turn
    is waiting or the model cannot answer. ``after_first_reply``: nothing unless the
    branch holds exactly one complete reply."""
    if after_first_reply and not has_one_reply(session):
        return
    conversation_id = session.conversation_id
    titled = None
    if not busy() and _ready(engine):
        with contextlib.suppress(EngineError):
            titled = title_conversation(session, busy)
    if titled is None:
        yield TitleMade(conversation_id, session.store.conversation(conversation_id).title, False)
    else:
        yield TitleMade(conversation_id, titled.title, titled.by_model)


def summarized_ahead(
    session: ChatSession, engine: Engine, busy: Callable[[], bool]
) -> Iterator[SummaryEvent | PrefilledAhead | Event | StorageWarning]:
    """The summary the next turn would need, written now; a failure is told, not raised."""
    if busy() or not _ready(engine):
        return
    try:
        yield from summarize_ahead(session, busy)
    except EngineError as exc:
        _log.warning("Summarizing ahead failed: %s", exc, exc_info=exc)
        yield SummaryEvent("fallback", message=f"Summarizing ahead failed: {exc.message}")
    except (sqlite3.Error, StoreError, OSError) as exc:
        _log.error("The summary could not be stored: %s", exc, exc_info=exc)
        yield StorageWarning(f"The summary could not be stored: {exc}.")


class Reading:
    """The work while the user reads, on the open conversation (``session()``; None:
    none is open) with the app's engine (``engine()``)."""

    def __init__(
        self, session: Callable[[], ChatSession | None], engine: Callable[[], Engine]
    ) -> None:
        self._session, self._engine = session, engine

    def make_title(
        self, *, busy: Callable[[], bool] = lambda: False, after_first_reply: bool = False
    ) -> Iterator[TitleMade]:
        """The open conversation's title by the model (a waiting turn: its first words)."""
        session = self._session()
        if session is not None:
            yield from title_made(
                session, self._engine(), busy, after_first_reply=after_first_reply
            )

    def prepare_next(self, *, busy: Callable[[], bool] = lambda: False) -> Iterator[AppEvent]:
        """While the user reads: the summary the next turn would need, and its prompt
        prefilled. ``busy`` (a turn waiting) stops it within a token."""
        session = self._session()
        if session is not None:
            yield from summarized_ahead(session, self._engine(), busy)
