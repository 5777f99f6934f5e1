"""``vllmchat bench slots``: the API slot loop's steps in one process (no HTTP), at 1,
4 and 8 clients decoding, against a bare loop of the same batches (one ``llama_batch``
of N tokens, ``llama_decode``, an argmax per row) as its bound.

- ``slots_n{N}``: ms a step, of it the decode call (on a GPU with every layer there:
  its launch) and the sampling (there: the wait for the step), and the loop's own
  Python; tokens per second. ``overlap`` says whether tokens were sent after the next
  launch (``slots.sends_while_decoding``).
- ``bare_n{N}``: ms a step and tokens per second of the bare loop.
- ``slots_vs_bare_n{N}``: the bare loop's step time ÷ the slot loop's (1.0: at the bound).
- ``state_copy_ms``: copying a finished turn's state out of its slot (median).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

WARM_STEPS, MEASURED_STEPS = 40, 100


def run(
    *, model: str | None = None, n_gpu_layers: int = 0, threads: int = 2, flash_attn: bool = False
) -> dict[str, Any]:
    import llama_cpp  # before numpy: the CUDA build segfaults in the other order
    import numpy as np

    from vllmchat.core.demo_model import demo_model_path
    from vllmchat.core.engine import requests as rq
    from vllmchat.core.engine.process.inference import slot_fill, slots
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.inference.state_cache import StateCache
    from vllmchat.core.engine.process.llama import seq_state
    from vllmchat.core.engine.process.llama.seq_state import SeqBatch, clear_seq
    from vllmchat.core.settings import LoadSettings, SamplingSettings

    path = model or str(demo_model_path())
    settings = LoadSettings(
        model_path=path,
        n_ctx=2048,
        api_slots=8,
        n_threads=threads,
        n_threads_batch=threads,
        flash_attn=flash_attn,
    ).with_changes(n_gpu_layers=n_gpu_layers)
    rt = LlamaRuntime(settings)
    loop = slots.SlotLoop(rt, StateCache(), lambda message: None, set())
    clock = {"decode": 0.0, "sample": 0.0}
    copies: list[float] = []
    decode, sample, copy = SeqBatch.decode, slots.sample_at, seq_state.seq_state  # type: ignore[attr-defined]

    def timed(key: str, call: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return call(*args)
            finally:
                spent = time.perf_counter() - t0
                if key == "copy":
                    copies.append(spent)
                else:
                    clock[key] += spent

        return wrapped

    greedy = SamplingSettings(
        temperature=0.0, max_tokens=160, ignore_eos=True, speculation="off", repeat_penalty=1.0
    )
    out: dict[str, Any] = {"model": path.rsplit("/", 1)[-1], "n_gpu_layers": n_gpu_layers}
    out["overlap"] = loop.overlap
    swapped = [(SeqBatch, "decode", decode), (slots, "sample_at", sample)]
    swapped.append((slot_fill, "seq_state", copy))
    for (owner, name, real), key in zip(swapped, ("decode", "sample", "copy"), strict=True):
        setattr(owner, name, timed(key, real))  # each call timed, then made as before
    try:
        rid = 0
        for n in (1, 4, 8):
            for k in range(n):
                rid += 1
                ask = [{"role": "user", "content": f"Client {k}, run {rid}: write about rivers."}]
                loop.admit(rid, rq.SlotChat(ask, greedy, client=f"c{k}", reuse=False))
            for _ in range(WARM_STEPS):  # the prompts are read, the steps warm
                loop.step()
            clock["decode"] = clock["sample"] = 0.0
            t0, steps = time.perf_counter(), 0
            while loop.busy and steps < MEASURED_STEPS:
                loop.step()
                steps += 1
            wall = (time.perf_counter() - t0) / steps * 1e3
            d, s = clock["decode"] / steps * 1e3, clock["sample"] / steps * 1e3
            while loop.busy:
                loop.step()
            out[f"slots_n{n}"] = {
                "step_ms": round(wall, 3),
                "decode_call_ms": round(d, 3),
                "sample_ms": round(s, 3),
                "python_ms": round(wall - d - s, 3),
                "tok_s": round(n * 1e3 / wall, 1),
            }
    finally:
        for owner, name, real in swapped:
            setattr(owner, name, real)
    out["state_copy_ms"] = round(statistics.median(copies) * 1e3, 3) if copies else None
    ctx, n_vocab = rt.llm.ctx, rt.llm.n_vocab()
    batch = SeqBatch(16)
    for n in (1, 4, 8):
        for seq in range(1, n + 1):
            clear_seq(ctx, seq)
        tokens = [100] * n
        for pos in range(WARM_STEPS + MEASURED_STEPS):
            if pos == WARM_STEPS:
                t0 = time.perf_counter()
            batch.clear()
            for i in range(n):
                batch.add(tokens[i], pos, i + 1, logits=True)
            batch.decode(ctx)
            for i in range(n):
                logits = llama_cpp.llama_get_logits_ith(ctx, i)
                tokens[i] = int(np.argmax(np.ctypeslib.as_array(logits, shape=(n_vocab,))))
        bare = (time.perf_counter() - t0) / MEASURED_STEPS * 1e3
        out[f"bare_n{n}"] = {"step_ms": round(bare, 3), "tok_s": round(n * 1e3 / bare, 1)}
        out[f"slots_vs_bare_n{n}"] = round(bare / out[f"slots_n{n}"]["step_ms"], 3)
    batch.close()
    loop.close()
    rt.close()
    return out
