"""The engine process's entry point, importable without loading llama.cpp.

The parent (a GUI, a CLI) references this function to spawn the engine; only
the child imports the worker and llama.cpp.
"""

from __future__ import annotations

from multiprocessing.connection import Connection


def engine_main(conn: Connection, memory_limit: int | None = None) -> None:
    """Run the engine; ``memory_limit`` caps its address space (bytes), so that
    llama.cpp reports out-of-memory instead of the system swapping or killing."""
    from vllmchat.core.machine import logs

    logs.configure(crash_tracebacks=True)  # the parent's log file, if it has one
    logs.log_uncaught()
    if memory_limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    from vllmchat.core.machine import nvml

    start_free = nvml.free_bytes()  # before llama.cpp creates any device context
    with logs.failure_logged("The engine process failed"):
        from vllmchat.core.engine.process.worker import worker_main

        worker_main(conn, start_free)
