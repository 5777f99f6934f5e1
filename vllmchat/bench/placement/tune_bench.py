"""``vllmchat bench tune``: the tuner's pick against an exhaustive sweep of the
same space, measured in the same run, with the memory estimate at each point.

Keys: ``pick_vs_best_ratio`` (the exhaustive sweep's decode tok/s of the
tuner's pick ÷ its best), ``tune_s`` and ``budget_s``, ``estimate_error_*``
(estimate vs the engine process's real device memory, per point), ``table``.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from vllmchat.core.app.engines import open_local
from vllmchat.core.app.placement.tuning import describe_file
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.models.memory import MIB
from vllmchat.core.placement import all_layers
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.events import TuneFinished
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult
from vllmchat.core.tuning.tuner import Sweep, TuneRequest, config_of, memory_limits, tune


def _measure(sweep: Sweep, c: TuneConfig, repeats: int) -> TunePoint:
    """The median-decode measurement of ``repeats`` runs of one configuration."""
    runs = [sweep.measure(c) for _ in range(repeats)]
    ok = [p for p in runs if p.fits]
    if not ok:
        return runs[0]
    ok.sort(key=lambda p: p.decode_tok_s)
    return ok[len(ok) // 2]


def tuned(
    engine: EngineClient, base: LoadSettings, budget_s: float, hw: Any, desc: Any
) -> TuneResult:
    """The tuner's result for ``base`` (nothing restored afterwards)."""
    result = None
    for event in tune(engine, TuneRequest(base=base, budget_s=budget_s), hw, desc, restore=False):
        if isinstance(event, TuneFinished):
            result = event.result
    assert result is not None
    return result


def run(
    *,
    model: str | None = None,
    n_ctx: int = 4096,
    budget_s: float = 60.0,
    flash_attn: bool = False,
    quick: bool = False,
) -> dict[str, Any]:
    path = model or str(demo_model_path())
    base = LoadSettings(model_path=path, n_ctx=n_ctx, flash_attn=flash_attn)
    desc = describe_file(path)
    engine = open_local()
    try:
        hw = engine.probe()
        limits = memory_limits(engine, hw)
        result = tuned(engine, base, budget_s, hw, desc)
        pick = result.pick
        repeats = 1 if quick else 3
        exhaustive = Sweep(
            engine, TuneRequest(base=base, budget_s=1e9), hw, desc, lambda: False, limits=limits
        )
        start = config_of(base)
        n_layer = desc.n_layer if desc is not None else 0
        layers = list(range(all_layers(n_layer) + 1)) if hw.gpu_offload else [0]
        threads = plan.thread_plan(base.n_threads)
        points: dict[TuneConfig, TunePoint] = {}
        per_thread = (
            threads if not hw.gpu_offload else [pick.n_threads if pick else start.n_threads]
        )
        for n in layers:  # every layer count (at every thread count on a CPU)
            for t in per_thread:
                c = replace(start.placed(n_gpu_layers=n), n_threads=t, n_threads_batch=t)
                points[c] = _measure(exhaustive, c, repeats)
        if hw.gpu_offload:  # thread counts at the best layer count
            fitting = [p for p in points.values() if p.fits and limits.allows(p)]
            top = max(fitting, key=lambda p: p.decode_tok_s, default=None)
            for t in threads if top else []:
                c = replace(top.config, n_threads=t, n_threads_batch=t)  # type: ignore[union-attr]
                points.setdefault(c, _measure(exhaustive, c, repeats))
        if pick is not None:
            key = replace(pick, n_threads_batch=pick.n_threads, n_ubatch=start.n_ubatch)
            pick_point = points.get(key) or _measure(exhaustive, key, repeats)
            points[key] = pick_point
        fitting = [p for p in points.values() if p.fits and limits.allows(p)]
        best = max(fitting, key=lambda p: p.decode_tok_s)
        errors = [p.estimate_error for p in points.values() if p.estimate_error is not None]
        errors_mib = [
            (p.estimate_vram - p.vram) / MIB
            for p in points.values()
            if p.vram is not None and p.estimate_vram is not None
        ]
    finally:
        engine.close()
    ratio = pick_point.decode_tok_s / best.decode_tok_s if pick is not None else 0.0
    return {
        "model": path,
        "device": result.device,
        "n_ctx": n_ctx,
        "pick": pick.label() if pick else None,
        "pick_reason": result.reason,
        "best": best.config.label(),
        "pick_decode_tok_s": round(pick_point.decode_tok_s, 2) if pick else None,
        "best_decode_tok_s": round(best.decode_tok_s, 2),
        "pick_vs_best_ratio": round(ratio, 4),
        "tune_s": round(result.seconds, 1),
        "budget_s": budget_s,
        "tune_points": len(result.points),
        "exhaustive_points": len(points),
        "memory_limit_mib": round((limits.vram or limits.ram) / MIB),
        "estimate_error_max_pct": round(max(map(abs, errors)) * 100, 2) if errors else None,
        "estimate_error_max_mib": round(max(map(abs, errors_mib)), 1) if errors_mib else None,
        "estimate_error_median_pct": round(statistics.median(errors) * 100, 2) if errors else None,
        "table": [_row(p) for p in sorted(points.values(), key=lambda p: p.config)],
        "tuner_points": [_row(p) for p in result.points],
    }


def _mib(value: int | None) -> int | None:
    return round(value / MIB) if value is not None else None


def _row(p: TunePoint) -> dict[str, Any]:
    return {
        "layers": p.config.placement.n_gpu_layers,
        "threads": p.config.n_threads,
        "threads_batch": p.config.n_threads_batch,
        "ubatch": p.config.n_ubatch,
        "fits": p.fits,
        "prefill_tok_s": round(p.prefill_tok_s, 1),
        "decode_tok_s": round(p.decode_tok_s, 2),
        "vram_mib": _mib(p.vram),
        "vram_buffers_mib": _mib(p.vram_buffers),
        "estimate_mib": _mib(p.estimate_vram),
        "ram_mib": _mib(p.ram),
        "free_mib": _mib(p.free_after),
        "n_cpu_moe": p.config.placement.n_cpu_moe,
        "note": p.note,
    }
