"""Speed of a loaded model on a fixed workload (runs inside the engine process).

The prompt is a fixed text's tokens, so every configuration sees the same
work; the decode feeds a fixed token sequence one token per step, which costs
what a real decode step costs (sampling is noise next to the forward pass).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.info import ProcessMemory, SpeedSample
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.machine import nvml
from vllmchat.core.resources import benchmark_text


def workload_tokens(rt: LlamaRuntime, count: int) -> list[int]:
    """``count`` token ids of the fixed text (repeated if it is short)."""
    base = rt.tokenize(benchmark_text(), special=False) or [0]
    ids: list[int] = []
    while len(ids) < count:
        ids.extend(base)
    return ids[:count]


def measure_speed(
    rt: LlamaRuntime,
    prompt_tokens: int,
    decode_tokens: int,
    should_stop: Callable[[], bool],
) -> SpeedSample:
    """Prefill ``prompt_tokens`` into an empty cache, then decode ``decode_tokens``.

    The KV cache is left empty (the caller restores a conversation's state).
    """
    room = rt.n_ctx - 1
    prompt_tokens = max(1, min(prompt_tokens, room - decode_tokens))
    decode_tokens = max(1, min(decode_tokens, room - prompt_tokens))
    ids = workload_tokens(rt, prompt_tokens + decode_tokens)
    rt.truncate(0)
    rt.pending = None
    rt.set_abort(should_stop)
    try:
        t0 = time.perf_counter()
        for start in range(0, prompt_tokens, rt.settings.n_batch):
            rt.decode(ids[start : min(start + rt.settings.n_batch, prompt_tokens)])
        prefill_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        for token in ids[prompt_tokens:]:
            if should_stop():
                raise EngineError(ErrorKind.INTERNAL, "aborted")
            rt.decode([token])
        decode_s = time.perf_counter() - t1
    finally:
        rt.set_abort(None)
        rt.truncate(0)
    return SpeedSample(
        prompt_tokens,
        prefill_s,
        decode_tokens,
        decode_s,
        rt.settings.n_threads,
        rt.settings.threads_batch,
    )


def process_memory(start_free: int | None, buffers_mib: dict[str, float]) -> ProcessMemory:
    """This process's RSS and device memory (NVML per process, else the free-memory drop)."""
    pid = os.getpid()
    free_now = nvml.free_bytes()
    drop = start_free - free_now if start_free is not None and free_now is not None else None
    return ProcessMemory(
        rss=psutil.Process(pid).memory_info().rss,
        vram_process=nvml.process_vram(pid),
        vram_drop=max(0, drop) if drop is not None else None,
        buffers_mib=dict(buffers_mib),
    )
