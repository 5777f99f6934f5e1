"""The log file: each failure the user is shown, with its traceback, in a rotating file.

``configure(folder)`` runs once per process, at start: the front ends' process
(``vllmchat.main``) and the engine process, which writes to the same file (it
finds it in ``VLLMCHAT_LOG_FILE``, set by the first process that configured it
and inherited by the processes it starts). A folder that cannot be written is
not a failure of the app: records then go to stderr, after one warning saying so.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import logging.handlers
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

LOG_NAME = "vllmchat.log"
MAX_BYTES = 1_000_000
BACKUPS = 3  # vllmchat.log.1 .. .3: at most 4 MB in all
FILE_ENV = "VLLMCHAT_LOG_FILE"
FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
LOGGER = "vllmchat"  # the package's loggers; other libraries' records are left alone


class _State:
    """This process's configuration: the log file (None: stderr only) and the handler."""

    file: Path | None = None
    handler: logging.Handler | None = None
    hooks: tuple[Any, Any] | None = None  # Python's hooks before ``log_uncaught``


_state = _State()


class SharedRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating file several processes append to: it rotates by the size of the
    file on disk, and reopens the file by its name when another process rotated it."""

    crash_file = False  # faulthandler writes there too (the engine process)

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is not None and _replaced(self.baseFilename, self.stream):
            self.stream.close()
            self.stream = self._open()
            self._follow_crashes()
        super().emit(record)

    def doRollover(self) -> None:
        super().doRollover()
        self._follow_crashes()

    def _follow_crashes(self) -> None:
        if self.crash_file and self.stream is not None:
            faulthandler.enable(file=self.stream, all_threads=True)


def _replaced(path: str, stream: IO[str]) -> bool:
    """Whether the file at ``path`` is no longer the one ``stream`` writes to."""
    try:
        on_disk = os.stat(path)
        mine = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return True
    return (on_disk.st_ino, on_disk.st_dev) != (mine.st_ino, mine.st_dev)


def configure(
    folder: Path | None = None, *, crash_tracebacks: bool = False, stderr: IO[str] | None = None
) -> Path | None:
    """Send the package's records (INFO and above) to ``folder``/vllmchat.log, or to the
    file ``VLLMCHAT_LOG_FILE`` names when ``folder`` is None; the log file, or None
    where there is none: then errors (not the warnings the user was shown as messages)
    go to stderr, after one line saying why. Once per process: a later call returns
    the first call's answer.

    ``crash_tracebacks``: a crash (segfault, abort) writes every thread's Python
    traceback to the file too (the engine process, where llama.cpp runs)."""
    if _state.handler is not None:
        return _state.file
    inherited = os.environ.get(FILE_ENV)
    path = folder / LOG_NAME if folder is not None else Path(inherited) if inherited else None
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.INFO)
    try:
        if path is None:
            raise FileNotFoundError("no log folder was given")
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = SharedRotatingFileHandler(
            path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
        )
    except OSError as exc:
        stream = stderr or sys.stderr
        _state.handler = logging.StreamHandler(stream)
        _state.handler.setFormatter(logging.Formatter("vllmchat: %(levelname)s: %(message)s"))
        _state.handler.setLevel(logging.ERROR)  # what the user was already told stays out
        logger.addHandler(_state.handler)
        if path is not None:
            reason = exc.strerror or str(exc)
            stream.write(
                f"vllmchat: the log folder {path.parent} cannot be written ({reason}): "
                "errors go to stderr only.\n"
            )
        return None
    handler.setFormatter(logging.Formatter(FORMAT))
    if crash_tracebacks:
        handler.crash_file = True
        handler._follow_crashes()
    logger.addHandler(handler)
    os.environ[FILE_ENV] = str(path)
    _state.file, _state.handler = path, handler
    return path


def configured() -> bool:
    """Whether ``configure`` ran in this process (with a file or stderr only)."""
    return _state.handler is not None


def log_file() -> Path | None:
    """The file this process logs to (None before ``configure`` or without one)."""
    return _state.file


@contextlib.contextmanager
def failure_logged(what: str) -> Iterator[None]:
    """Log an exception that leaves the block, with its traceback, and let it go on
    (where Python's hooks never see it: a ``multiprocessing`` child's target)."""
    try:
        yield
    except Exception:
        logging.getLogger(LOGGER).critical(what, exc_info=True)
        raise


def log_uncaught() -> None:
    """Exceptions nothing caught (in the main thread, other threads, Qt's slots) go to the
    log file with their traceback, then to Python's own report as before."""
    if _state.file is None or _state.hooks is not None:
        return  # stderr is the log (Python's own report is the record), or done already
    logger = logging.getLogger(LOGGER)
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            logger.critical("Uncaught exception", exc_info=(kind, value, tb))
        previous(kind, value, tb)

    previous_thread = threading.excepthook

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and not issubclass(args.exc_type, SystemExit):
            where = args.thread.name if args.thread is not None else "a thread"
            exc = (args.exc_type, args.exc_value, args.exc_traceback)
            logger.critical("Uncaught exception in %s", where, exc_info=exc)
        previous_thread(args)

    _state.hooks = (previous, previous_thread)
    sys.excepthook, threading.excepthook = hook, thread_hook
