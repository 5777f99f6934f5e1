"""GPU measurements on a CUDA build of llama.cpp (run on a machine with a GPU).

    python -m vllmchat.bench.engine.gpu_bench MODEL.gguf [--layers 0,8,16,24,33]

Prints one JSON object: the memory estimate against the CUDA and CPU buffers
llama.cpp allocates at several ``n_gpu_layers``; the engine's decode speed
through its process pipe against raw llama-cpp-python with every layer on
the GPU; and a live reload from all layers to half, KV state carried over.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import llama_cpp  # noqa: F401  (first: the CUDA build segfaults if numpy loads before it)

from vllmchat.bench.engine.engine_bench import (
    DECODE_TOKENS,
    _engine_decode_tps,
    _grow,
    _raw_decode_tps,
    _reload_figures,
)
from vllmchat.core.app.engines import open_local
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.description import describe
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.placement import Placement, all_layers
from vllmchat.core.settings import LoadSettings


def _pct(est: float, real: float) -> float:
    return abs(est - real) / real * 100 if real else 0.0


def estimate_cases(model: str, layers: list[int], n_ctx: int) -> list[dict[str, Any]]:
    desc = describe(read_header(model))
    cases = []
    for ngl in layers:
        for fa in (True, False):
            rt = LlamaRuntime(
                LoadSettings(
                    model_path=model,
                    placement=Placement(n_gpu_layers=ngl),
                    n_ctx=n_ctx,
                    flash_attn=fa,
                    n_threads=8,
                )
            )
            buffers = rt.info.buffers_mib
            rt.close()
            vram = sum(v for k, v in buffers.items() if "CUDA" in k and "Host" not in k)
            ram = sum(buffers.values()) - vram
            e = estimate(
                desc, FitSettings(placement=Placement(n_gpu_layers=ngl), n_ctx=n_ctx, flash_attn=fa)
            )
            est_vram, est_ram = (e.vram - e.overhead_gpu) / MIB, e.ram / MIB
            cases.append(
                {
                    "n_gpu_layers": ngl,
                    "flash_attn": fa,
                    "buffers_mib": buffers,
                    "measured": {"vram": round(vram, 1), "ram": round(ram, 1)},
                    "estimated": {"vram": round(est_vram, 1), "ram": round(est_ram, 1)},
                    "error_pct": round(_pct(est_vram + est_ram, vram + ram), 2),
                    "vram_error_pct": round(_pct(est_vram, vram), 2),
                }
            )
    return cases


def in_process_tps(settings: LoadSettings, n: int) -> float:
    """The engine's turn loop in this process, with no pipe: where does overhead live?"""
    from vllmchat.core.engine.events import StatsEvent
    from vllmchat.core.engine.process.inference.turn import run_turn
    from vllmchat.core.settings import SamplingSettings

    rt = LlamaRuntime(settings)
    stats = []
    try:
        sampling = SamplingSettings(
            temperature=0.0, repeat_penalty=1.0, max_tokens=n, ignore_eos=True
        )
        run_turn(
            rt,
            [{"role": "user", "content": "Write a long story."}],
            sampling,
            should_stop=lambda: False,
            emit=lambda e: stats.append(e.stats) if isinstance(e, StatsEvent) else None,
        )
    finally:
        rt.close()
    return stats[-1].decode_tok_s


def engine_figures(model: str, n_layer: int) -> dict[str, Any]:
    full = LoadSettings(
        model_path=model,
        placement=Placement(n_gpu_layers=all_layers(n_layer)),
        n_ctx=4096,
        flash_attn=True,
        n_threads=8,
    )
    client = open_local()
    try:
        t0 = time.perf_counter()
        client.load(full)
        cold = time.perf_counter() - t0
        raw, ours, inproc = [], [], []
        for _ in range(3):
            raw.append(_raw_decode_tps(full, DECODE_TOKENS))
            ours.append(_engine_decode_tps(client, DECODE_TOKENS))
            inproc.append(in_process_tps(full, DECODE_TOKENS))
        result: dict[str, Any] = {
            "in_process_turn_tok_s": round(statistics.median(inproc), 1),
            "raw_decode_tok_s": round(statistics.median(raw), 1),
            "engine_decode_tok_s": round(statistics.median(ours), 1),
            "decode_ratio": round(statistics.median(ours) / statistics.median(raw), 4),
        }
        client.load(full)
        messages: list[dict[str, str]] = [{"role": "system", "content": "Tell long stories."}]
        _grow(client, messages, 1500)
        result.update(_reload_figures(client, full, messages, n_gpu_layers=n_layer // 2))
        result["cold_load_s"] = round(cold, 3)
        result["reload_time_ratio"] = round(result["reload_s"] / cold, 3)
        result["probe"] = repr(client.probe())
    finally:
        client.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--layers", default="0,8,16,24,33")
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args()
    layers = [int(x) for x in args.layers.split(",")]
    cases = estimate_cases(args.model, layers, args.n_ctx)
    out: dict[str, Any] = {
        "model": args.model,
        "max_abs_error_pct": max(c["error_pct"] for c in cases),
        "max_vram_error_pct": max(
            (c["vram_error_pct"] for c in cases if c["measured"]["vram"]), default=0.0
        ),
        "cases": cases,
    }
    print(json.dumps(out), flush=True)
    n_layer = describe(read_header(args.model)).n_layer
    out["engine"] = engine_figures(args.model, n_layer)
    print(json.dumps(out["engine"]), flush=True)


if __name__ == "__main__":
    main()
