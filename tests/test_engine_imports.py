"""The engine process loads llama.cpp before numpy (a CUDA build segfaults the other way)."""

from __future__ import annotations

import multiprocessing as mp


def _import_order(queue: mp.Queue) -> None:
    import sys

    from vllmchat.core.engine.process.serving import entry  # what the client spawns

    assert entry.engine_main
    import vllmchat.core.engine.process.serving.worker  # noqa: F401  (what engine_main imports first)

    # sys.modules keeps insertion order; a module is (re)inserted once it has loaded.
    names = list(sys.modules)
    numpy = [i for i, n in enumerate(names) if n == "numpy" or n.startswith("numpy.")]
    queue.put((names.index("llama_cpp.llama_cpp"), numpy[0] if numpy else None))


def test_the_engine_process_loads_llama_cpp_before_numpy():
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_import_order, args=(queue,))
    proc.start()
    libraries_loaded_at, numpy_at = queue.get(timeout=60)
    proc.join(30)
    assert numpy_at is None or libraries_loaded_at < numpy_at
