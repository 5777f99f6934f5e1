"""How far a verified batch's rows are from single steps' logits, on this machine.

Speculation keeps greedy output token for token only where the two are equal
(``core/engine/exactness.py`` says where this build promises it). Each case fills
the context, decodes ``rows`` tokens one step at a time, then the same tokens in
one batch with logits for every row, and reports the largest logit difference.
``context`` 252 with 8 rows crosses the 256-cell step in which llama.cpp grows the
attended KV cache, so the batch attends to more cells than the first single steps.

    python -m vllmchat.bench.engine.batch_invariance MODEL [N_GPU_LAYERS] [--flash-attn]
        [--threads=N] [--cases=600+5,252+8]
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

import llama_cpp  # before numpy (CUDA builds crash when numpy loads first)

from vllmchat.core.engine.process.llama import llama_adapter

CASES = ((600, 5), (252, 8), (1500, 8), (1500, 2))  # (context tokens, rows)


def _logits(llm: llama_cpp.Llama, row: int) -> list[float]:
    data = llama_cpp.llama_get_logits_ith(llm.ctx, row)
    return list(ctypes.cast(data, ctypes.POINTER(ctypes.c_float))[: llm.n_vocab()])


def largest_difference(llm: llama_cpp.Llama, prompt: list[int], tail: list[int]) -> float:
    """The largest |logit| difference between single steps and one batch of ``tail``
    after ``prompt`` (the KV cache is left holding ``prompt``)."""
    llama_adapter.drop_kv_after(llm, 0)
    llm.n_tokens = 0
    llm.eval(prompt)
    singles = []
    for token in tail:
        llm.eval([token])
        singles.append(_logits(llm, -1))
    assert llama_adapter.drop_kv_after(llm, len(prompt))
    llm.n_tokens = len(prompt)
    llama_adapter.decode_all_logits(llm, tail)
    batch = [_logits(llm, i) for i in range(len(tail))]
    return max(
        abs(a - b)
        for s, b_row in zip(singles, batch, strict=True)
        for a, b in zip(s, b_row, strict=True)
    )


def measure(
    model: str,
    *,
    n_gpu_layers: int = 0,
    flash_attn: bool = False,
    n_threads: int = 2,
    cases: tuple[tuple[int, int], ...] = CASES,
) -> dict[str, Any]:
    """The largest difference of each case in ``CASES``, on ``model`` at this placement."""
    llm = llama_cpp.Llama(
        model_path=model,
        n_ctx=2048,
        n_gpu_layers=n_gpu_layers,
        n_threads=n_threads,
        flash_attn=flash_attn,
        verbose=False,
    )
    try:
        vocab = llm.n_vocab()
        source = [(17 + 31 * i) % (vocab - 100) + 50 for i in range(1600)]
        found = {}
        for context, rows in cases:
            prompt = source[:context]
            tail = source[context : context + rows]
            found[f"{context}+{rows}"] = largest_difference(llm, prompt, tail)
    finally:
        llm.close()
    exact = all(v == 0.0 for v in found.values())
    return {
        "n_gpu_layers": n_gpu_layers,
        "flash_attn": flash_attn,
        "largest_difference": found,
        "exact": exact,
    }


def main(argv: list[str]) -> int:
    """Print the figures for the model and placement named in ``argv``."""
    args = [a for a in argv if not a.startswith("--")]
    options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    cases = (
        tuple((int(c), int(r)) for c, r in (x.split("+") for x in options["cases"].split(",")))
        if "cases" in options
        else CASES
    )
    threads = int(options.get("threads", min(8, os.cpu_count() or 2)))
    layers = int(args[1]) if len(args) > 1 else 0
    figures = measure(
        args[0],
        n_gpu_layers=layers,
        flash_attn="--flash-attn" in argv,
        cases=cases,
        n_threads=threads,
    )
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
