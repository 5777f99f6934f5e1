"""Engine processes kept between tests: a client closed with no model left in its
process hands the process on to the next client, instead of a new one being spawned.

A process goes back to the pool only after it has let its model go (``Unload``, an
operation this module registers in the engine process), and only when it is alive
and no call of the client is in flight; its request ids go on counting, so no late
message of an earlier client can be read as an answer. A process that died, was
killed or was stopped mid-call is never reused. To the next test the process is one
that has started and holds no model: what a new ``EngineClient`` has after ``start``.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import ClassVar

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.engine.local.engine_process import EngineProcess
from vllmchat.core.engine.process.serving.registry import Context, handles

MODULE = __name__  # imported by the pooled engine processes for ``Unload``
IDLE_MAX = 2  # processes kept waiting at most (each holds a Python and llama.cpp)


@dataclass(frozen=True)
class Unload(rq.Request[None]):
    """Let the model go (after the last checkpoint is written)."""

    changes_model: ClassVar[bool] = True


@handles(Unload)
def unload(ctx: Context, r: Unload) -> None:
    ctx.unload()


class EnginePool:
    """Started engine processes with no model, each with its next request id."""

    def __init__(self) -> None:
        self.idle: list[tuple[EngineProcess, itertools.count[int]]] = []
        self.environ: dict[int, dict[str, str]] = {}  # each process's environment at start
        self.reused = 0
        self.spawned = 0
        self.kept: set[int] = set()  # processes held by a module's fixture

    def take(self) -> tuple[EngineProcess, itertools.count[int]]:
        """A started process: a waiting one if one is alive and was started with the
        environment the test has now, else a new one."""
        while self.idle:
            process, ids = self.idle.pop()
            if process.alive and self.environ.get(id(process)) == _environ():
                self.reused += 1
                return process, ids
            self._end(process)
        process = EngineProcess(None, (MODULE,))
        process.start()
        self.environ[id(process)] = _environ()
        self.spawned += 1
        return process, itertools.count(1)

    def give(self, process: EngineProcess, ids: itertools.count[int]) -> None:
        if len(self.idle) < IDLE_MAX:
            self.idle.append((process, ids))
        else:
            self._end(process)

    def pids(self) -> set[int]:
        """The processes that may outlive a test: those waiting, and those kept for a
        whole module (``keep``)."""
        return {p.pid for p, _ in self.idle if p.pid is not None} | self.kept

    def keep(self, pid: int | None) -> None:
        """A process a module's fixture holds across its tests (a server's engine)."""
        if pid is not None:
            self.kept.add(pid)

    def close(self) -> None:
        while self.idle:
            self._end(self.idle.pop()[0])

    def _end(self, process: EngineProcess) -> None:
        self.environ.pop(id(process), None)
        try:
            process.send(rq.Exit())
            process.join(timeout=5)
        except (OSError, EngineError):
            pass
        process.discard()


def _environ() -> dict[str, str]:
    """The environment a process starts with, less pytest's name of the current test."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


class PooledEngineClient(EngineClient):
    """An ``EngineClient`` whose process comes from ``pool`` and goes back to it on
    ``close`` (with its model let go); everything else is the real client's."""

    def __init__(self, pool: EnginePool) -> None:
        super().__init__()
        self.pool = pool

    def start(self) -> None:
        if self.alive:
            return
        self.process.discard()
        self.process, self._ids = self.pool.take()

    def close(self) -> None:
        process = self.process
        if process.alive and self._request_lock.acquire(timeout=1):
            try:
                self._answer(Unload())
                reusable = True
            except EngineError:
                reusable = False
            finally:
                self._request_lock.release()
            if reusable and process.alive:
                self.pool.give(process, self._ids)
                self.process = EngineProcess(None, (MODULE,))
                self._held = None
                return
        super().close()
