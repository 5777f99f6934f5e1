"""The engine process's entry point, importable without loading llama.cpp.

The parent (a GUI, a CLI) references this function to spawn the engine; only
the child imports the worker and llama.cpp.
"""

from __future__ import annotations

from multiprocessing.connection import Connection


def engine_main(conn: Connection) -> None:
    from vllmchat.core.engine.worker import worker_main

    worker_main(conn)
