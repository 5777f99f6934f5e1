"""The engine process's entry point, importable without loading llama.cpp.

The parent (a GUI, a CLI) references this function to spawn the engine; only
the child imports the worker and llama.cpp.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllmchat.core.engine.core_turns import CoreTurns

try:
    import resource
except ImportError:  # Windows has no rlimits: the engine runs uncapped there
    resource = None  # type: ignore[assignment]


def cap_address_space(memory_limit: int | None) -> bool:
    """Cap this process's address space at ``memory_limit`` bytes, so that llama.cpp
    reports out-of-memory instead of the system swapping or killing; False where
    the system has no such limit (Windows) or none was asked."""
    if not memory_limit or resource is None:
        return False
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    return True


def engine_main(
    conn: Connection,
    memory_limit: int | None = None,
    handler_modules: Sequence[str] = (),
    turns: CoreTurns | None = None,
) -> None:
    """Run the engine; ``memory_limit`` caps its address space (bytes, where the
    system can); ``handler_modules`` are imported for the operations they add;
    ``turns``: the cores it lends between tokens."""
    from vllmchat.core.machine import logs

    logs.configure(crash_tracebacks=True)  # the parent's log file, if it has one
    logs.log_uncaught()
    cap_address_space(memory_limit)
    from vllmchat.core.machine import nvml

    start_free = nvml.free_bytes()  # before llama.cpp creates any device context
    with logs.failure_logged("The engine process failed"):
        from vllmchat.core.engine.process.serving.worker import worker_main

        worker_main(conn, start_free, handler_modules, turns)
