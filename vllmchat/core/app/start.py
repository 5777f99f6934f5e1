"""What the application starts on: the user's conversations (a damaged database
recovered first, another process's lock waited out) and the cache of saved KV
states; a ``ChatApp`` on them, or why none can start.

Front ends call ``open_app`` (or ``open_storage`` where the window's bridge builds
the application itself) and never open the store; what they are handed is passed on
and closed, never read.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.settings_model import Persist
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.faults import LockListener
from vllmchat.core.conversations.store.recovery import open_default_store, open_store
from vllmchat.core.conversations.store.schema import NewerStoreError
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.paths import kv_cache_dir

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CannotStart:
    """The conversations could not be opened (written by a newer vllmchat, damaged
    past recovery, locked past the wait, a disk error); nothing was changed."""

    message: str


class Storage:
    """The opened conversations and KV cache, for the application layer; ``recovered``
    says what a recovery of a damaged database did ("" when none was needed)."""

    def __init__(self, store: ConversationStore, kv: KVStateCache, recovered: str = "") -> None:
        self.store, self.kv, self.recovered = store, kv, recovered

    @property
    def file(self) -> Path:
        """The conversations' database file."""
        return self.store.file

    def tell_locks(self, listener: LockListener | None) -> None:
        """Tell ``listener`` (from any thread) each wait for another process's lock."""
        self.store.on_lock = listener

    def app(
        self,
        settings: AppSettings | None = None,
        *,
        engine: Engine | None = None,
        persist: Persist | None = None,
    ) -> ChatApp:
        """A ``ChatApp`` on these conversations (the local engine unless ``engine``)."""
        return ChatApp(self.store, self.kv, settings, engine=engine, persist=persist)

    def close(self) -> None:
        """Close the conversations (after the application's shutdown)."""
        self.store.close()


def database_of(app: ChatApp) -> Path:
    """The database file of the conversations ``app`` runs on."""
    return app.store.file


def open_storage(
    *,
    on_lock: LockListener | None = None,
    file: str | Path | None = None,
    kv_folder: str | Path | None = None,
) -> Storage | CannotStart:
    """The user's conversations in the data folder (or ``file``) and the KV cache in
    its folder (or ``kv_folder``); each lock wait is told to ``on_lock``."""
    try:
        if file is None:
            store, recovery = open_default_store(on_lock=on_lock)
        else:
            store, recovery = open_store(file, on_lock=on_lock)
    except (NewerStoreError, StoreError, sqlite3.Error, OSError) as exc:
        _log.error("The conversations could not be opened: %s", exc, exc_info=exc)
        return CannotStart(str(exc))
    kv = KVStateCache(kv_folder if kv_folder is not None else kv_cache_dir())
    return Storage(store, kv, recovery.message() if recovery is not None else "")


@dataclass(frozen=True)
class Started:
    """A ready application on the user's conversations; ``recovered`` as in ``Storage``."""

    app: ChatApp
    storage: Storage

    @property
    def recovered(self) -> str:
        return self.storage.recovered

    def close(self) -> None:
        """The open conversation's KV state saved, the engine ended, the store closed."""
        try:
            self.app.shutdown()
        finally:
            self.storage.close()


def open_app(
    settings: AppSettings | None = None,
    *,
    engine: Engine | None = None,
    persist: Persist | None = None,
    on_lock: LockListener | None = None,
    file: str | Path | None = None,
    kv_folder: str | Path | None = None,
) -> Started | CannotStart:
    """A ``ChatApp`` on the user's conversations (see ``open_storage``), or why not."""
    storage = open_storage(on_lock=on_lock, file=file, kv_folder=kv_folder)
    if isinstance(storage, CannotStart):
        return storage
    return Started(storage.app(settings, engine=engine, persist=persist), storage)
