"""What verifying k drafted tokens costs: one batch of k + 1 tokens, with logits for
those positions only, against one plain decode step, on a context already filled.

This bounds what speculation can gain on a machine whatever the acceptance: with
every draft accepted, a verify of k yields k + 1 tokens for ``cost[k]`` steps.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

import llama_cpp  # before numpy (CUDA builds crash when numpy loads first)

from vllmchat.core.engine.process.llama.llama_adapter import decode_all_logits, drop_kv_after

KS = (1, 2, 4, 6, 8)  # on CUDA a verify of up to 7 drafts keeps one kernel


def _median_s(llm: llama_cpp.Llama, tokens: list[int], base: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        decode_all_logits(llm, tokens)
        times.append(time.perf_counter() - t)
        drop_kv_after(llm, base)
        llm.n_tokens = base
    return statistics.median(times)


def measure(
    model: str, *, n_gpu_layers: int, n_threads: int, context_tokens: int = 512, repeats: int = 15
) -> dict[str, Any]:
    """``cost[k]`` (verify of k drafts ÷ one step) and the speed-up bound
    ``(k + 1) / cost[k]`` at full acceptance, after ``context_tokens`` of context."""
    llm = llama_cpp.Llama(
        model,
        n_ctx=4096,
        n_gpu_layers=n_gpu_layers,
        n_threads=n_threads,
        n_batch=512,
        flash_attn=True,
        verbose=False,
    )
    try:
        prompt = [(17 + 31 * i) % (llm.n_vocab() - 100) + 50 for i in range(context_tokens)]
        llm.eval(prompt)
        base = llm.n_tokens
        _median_s(llm, prompt[:1], base, 3)  # warm up
        single = _median_s(llm, prompt[:1], base, repeats)
        cost = {k: _median_s(llm, prompt[: k + 1], base, repeats) / single for k in KS}
    finally:
        llm.close()
    return {
        "single_step_ms": round(single * 1e3, 2),
        "verify_cost": {str(k): round(c, 2) for k, c in cost.items()},
        "bound_at_full_acceptance": {str(k): round((k + 1) / c, 2) for k, c in cost.items()},
    }


def measure_apart(model: str, *, n_gpu_layers: int, n_threads: int, repeats: int) -> dict[str, Any]:
    """``measure`` in a process of its own, where llama.cpp loads before numpy (a CUDA
    build crashes at load in a process that imported numpy first)."""
    args = [model, str(n_gpu_layers), str(n_threads), str(repeats)]
    done = subprocess.run(
        [sys.executable, "-m", "vllmchat.bench.engine.verify_cost", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


if __name__ == "__main__":
    path, layers, threads, times = sys.argv[1:5]
    figures = measure(path, n_gpu_layers=int(layers), n_threads=int(threads), repeats=int(times))
    print(json.dumps(figures))
