"""What can go wrong with the conversation database, told apart by SQLite's error codes.

A lock is not damage: SQLITE_BUSY or SQLITE_LOCKED means another process (a second
vllmchat, a backup tool) is writing, and is waited out with a message. Only
SQLITE_CORRUPT, SQLITE_NOTADB or a failed ``quick_check`` is damage.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

LOCK_WAIT_S = 30.0  # how long a held write lock is waited out before giving up
LOCK_WAIT_ENV = "VLLMCHAT_LOCK_WAIT_S"  # seconds, to wait longer or shorter than that
QUIET_MS = 500  # a lock held shorter than this is waited out without a word
BUSY, LOCKED, CORRUPT, NOTADB = 5, 6, 11, 26  # SQLite's primary result codes
_LOCK_TEXTS = ("database is locked", "database table is locked", "database schema is locked")
_DAMAGE_TEXTS = ("database disk image is malformed", "file is not a database")
NEEDS_CHECK = ".needs-check"  # beside the database: check it whole at the next start
WRITING = "another vllmchat (or another program) is writing to the conversation database"

T = TypeVar("T")


class StoreError(ValueError):
    """A request the store cannot honour; the message says why."""


class StoreLocked(StoreError):
    """Another process held the database's write lock longer than the wait limit."""


class StoreDamaged(StoreError):
    """SQLite found the database damaged while it was in use."""


class StoreUnavailable(StoreError):
    """The database cannot be opened for a reason that is neither a lock nor damage."""


@dataclass(frozen=True)
class StoreBusy:
    """Another process holds the database's write lock; the store waits for it."""

    path: Path
    limit_s: float
    reason: str = WRITING

    @property
    def message(self) -> str:
        return f"{self.reason}; waiting up to {self.limit_s:g} s…"


@dataclass(frozen=True)
class StoreFree:
    """The lock the store waited for was released; work goes on."""

    path: Path
    waited_s: float

    @property
    def message(self) -> str:
        return f"the conversation database is free again (waited {self.waited_s:.1f} s)"


LockEvent = StoreBusy | StoreFree
LockListener = Callable[[LockEvent], None]


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    return code & 0xFF if isinstance(code, int) else None


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds a lock."""
    return _says(exc, sqlite3.OperationalError, (BUSY, LOCKED), _LOCK_TEXTS)


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the file is damaged or no database."""
    return _says(exc, sqlite3.DatabaseError, (CORRUPT, NOTADB), _DAMAGE_TEXTS)


def _says(
    exc: BaseException, kind: type[Exception], codes: tuple[int, ...], texts: tuple[str, ...]
) -> bool:
    """Whether ``exc`` is SQLite's error of ``kind`` with one of these primary codes (or,
    on Python 3.10, which has no codes, one of these texts)."""
    if not isinstance(exc, kind):
        return False
    code = _code(exc)
    if code is not None:
        return code in codes
    return any(text in str(exc) for text in texts)


def lock_wait_s() -> float:
    """The wait limit: ``VLLMCHAT_LOCK_WAIT_S`` when set to a number, else 30 s."""
    try:
        value = float(os.environ.get(LOCK_WAIT_ENV, ""))
    except ValueError:
        return LOCK_WAIT_S
    return value if value >= 0 else LOCK_WAIT_S


class InUse(Exception):
    """Another process has the file open; the message says who."""


class LockWaits:
    """Runs database work, waiting out another process's lock with a message.

    ``on_lock`` hears ``StoreBusy`` when a wait starts and ``StoreFree`` when it
    ends; past ``limit_s`` the work ends in ``StoreLocked``. Damage met on the way
    marks the database for a whole check at the next start and is ``StoreDamaged``.
    """

    def __init__(
        self, file: Path, *, limit_s: float | None = None, on_lock: LockListener | None = None
    ) -> None:
        self.file = file
        self.limit_s = lock_wait_s() if limit_s is None else limit_s
        self.on_lock = on_lock

    def call(self, work: Callable[[], T]) -> T:
        """``work()``, tried again while another process holds the lock."""
        first, told = time.monotonic(), ""
        while True:
            try:
                result = work()
            except InUse as exc:
                told = self._wait(first, told, str(exc))
                continue
            except sqlite3.DatabaseError as exc:
                if is_corrupt(exc):
                    raise self.damaged(exc) from exc
                if not is_locked(exc):
                    raise
                told = self._wait(first, told, WRITING)
                continue
            if told:
                self._say(StoreFree(self.file, time.monotonic() - first))
            return result

    def _wait(self, first: float, told: str, reason: str) -> str:
        waited = time.monotonic() - first
        if waited >= self.limit_s:
            raise StoreLocked(
                f"{reason[:1].upper()}{reason[1:]}: gave up after {self.limit_s:g} s and "
                "changed nothing. Close the other vllmchat or program, or let it finish, "
                f"and try again ({self.file})."
            )
        if told != reason:
            self._say(StoreBusy(self.file, self.limit_s, reason))
        time.sleep(min(0.05, self.limit_s - waited))
        return reason

    def _say(self, event: LockEvent) -> None:
        if self.on_lock is not None:
            self.on_lock(event)

    def damaged(self, exc: BaseException) -> StoreDamaged:
        """The error for damage met in use; the next start checks the file whole."""
        with contextlib.suppress(OSError):  # else the next start's bounded check still runs
            Path(str(self.file) + NEEDS_CHECK).touch()
        return StoreDamaged(
            f"The conversation database {self.file} is damaged ({exc}). Start vllmchat "
            "again: it keeps the damaged file and recovers what can be read."
        )
