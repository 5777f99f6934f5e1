"""The engine's child process and its pipe, as the client sees them.

Started with ``spawn``; a message that cannot be sent or received because the
process is gone becomes ``EngineError(ENGINE_DIED)`` with how it ended in words
(a signal, an exit code), never a crash of the caller.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
from collections.abc import Sequence
from typing import Any

from vllmchat.core.engine.core_turns import CoreTurns
from vllmchat.core.engine.events import EngineError, ErrorKind

_POLL_S = 0.05

_SIGNALS = {  # by name: Windows has neither SIGKILL nor SIGBUS
    "SIGKILL": "it was killed (SIGKILL; the system may have run out of memory)",
    "SIGSEGV": "it crashed (segmentation fault)",
    "SIGABRT": "it aborted (llama.cpp assertion or out of memory)",
    "SIGBUS": "it crashed (bus error: was the model file changed or removed?)",
}


def describe_exit(exitcode: int | None) -> str:
    """Human words for how the engine process ended."""
    if exitcode is None:
        return "The engine stopped answering."
    if exitcode < 0:
        sig = -exitcode
        name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
        return f"The engine process ended: {_SIGNALS.get(name, f'it got {name}')}."
    return f"The engine process exited with code {exitcode}."


def _not_running() -> EngineError:
    return EngineError(ErrorKind.ENGINE_DIED, "The engine is not running.")


class EngineProcess:
    """One engine process at a time: start it, send to it, read from it, end it."""

    def __init__(self, memory_limit: int | None, handler_modules: Sequence[str]) -> None:
        self.memory_limit = memory_limit
        self.handler_modules = tuple(handler_modules)
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self._send_lock = threading.Lock()
        self.last_error: EngineError | None = None
        self.turns = CoreTurns(self._ctx)  # a core the process lends between tokens

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def exit_reason(self) -> str | None:
        """How the process ended (None while it runs or before it started)."""
        if self._proc is None or self._proc.is_alive():
            return None
        return describe_exit(self._proc.exitcode)

    def start(self) -> None:
        """Start a process if none is running."""
        if self.alive:
            return
        from vllmchat.core.engine.process.serving.entry import engine_main

        self.discard()
        parent, child = self._ctx.Pipe(duplex=True)
        self.turns = CoreTurns(self._ctx)  # nothing lent until the new process loads
        proc = self._ctx.Process(
            target=engine_main,
            args=(child, self.memory_limit, self.handler_modules, self.turns),
            daemon=True,
            name="vllmchat-engine",
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent

    def discard(self) -> None:
        """Close the pipe and end the process (killed if it still runs)."""
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(timeout=5)
        self._proc = self._conn = None

    def join(self, timeout: float) -> None:
        if self._proc is not None:
            self._proc.join(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the process (what a crash looks like)."""
        if self._proc is not None:
            self._proc.kill()

    def send(self, message: object) -> None:
        """Send one message (from any thread)."""
        if self._conn is None:
            raise _not_running()
        try:
            with self._send_lock:
                self._conn.send(message)
        except (OSError, ValueError) as exc:
            raise self.died() from exc

    def died(self) -> EngineError:
        """The error that says how the process ended (also kept as ``last_error``)."""
        proc = self._proc
        if proc is not None:
            proc.join(timeout=2)
        err = EngineError(
            ErrorKind.ENGINE_DIED, describe_exit(proc.exitcode if proc is not None else None)
        )
        self.last_error = err
        return err

    def recv(self) -> Any:
        """The next message; the process's last one when it has just ended."""
        while True:
            try:
                if self._conn.poll(_POLL_S):
                    return self._conn.recv()
            except (EOFError, OSError) as exc:
                raise self.died() from exc
            if not self._proc.is_alive():
                try:
                    if self._conn.poll(0):
                        return self._conn.recv()
                except (EOFError, OSError):
                    pass
                raise self.died()

    def require_alive(self) -> None:
        if not self.alive:
            raise self.died() if self._proc is not None else _not_running()
