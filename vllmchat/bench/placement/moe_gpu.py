"""``vllmchat bench moe`` on a GPU: the tuner's pick against the placements at the
edge of the card, measured in the same run.

Stages (each timed, progress on stderr): the tuner; its own walk from the
estimate's bound one placement at a time up to the most-on-GPU placement that
fits (loads, decodes and leaves the tuner's margin free), the next one measured
as not fitting, and four placements below it; the pick and the walk's two best
re-measured in alternation (four rounds), whose medians give ``pick_vs_best_ratio``. Optional:
llama.cpp's own choice (``--fit-args``) and the best whole-layer placement
(``--full``).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from vllmchat.bench.placement.tune_bench import _measure, _mib, _row, tuned
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.models.advisor import max_gpu_expert_layers, max_gpu_layers
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.placement import all_layers
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.results import TuneConfig, TunePoint
from vllmchat.core.tuning.tuner import (
    Sweep,
    TuneRequest,
    available,
    memory_limits,
    with_free_vram,
)

BELOW_EDGE = 4  # placements measured below the edge
DECODE_TOKENS = 128  # as the tuner's finalists decode


def log(**fields: Any) -> None:
    print(json.dumps(fields), file=sys.stderr, flush=True)


class Stages:
    """Elapsed seconds per stage, each announced on stderr as it starts and ends."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        log(stage=name, status="started")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - t0, 1)
            log(stage=name, seconds=self.seconds[name])


def row(p: TunePoint) -> dict[str, Any]:
    return (
        _row(p)
        | {"under_margin": p.under_margin}
        | ({"final_round": p.final_round} if p.final_round else {})
    )


def _walk_to_edge(
    sweep: Sweep, at: Callable[[int], TuneConfig], bound: int, top: int
) -> int | None:
    """One placement at a time from ``bound``: up while each fits with the margin free,
    or down until one does; the most-on-GPU value that fits (None: none does)."""

    def ok(v: int) -> bool:
        p = sweep.measure(at(v))
        sweep.points.append(p)
        log(point=row(p))
        return p.fits and sweep.limits.allows(p)

    v = max(0, min(bound, top))
    if ok(v):
        while v < top and ok(v + 1):
            v += 1
        return v
    while v > 0:
        v -= 1
        if ok(v):
            return v
    return None


def _interleaved(
    sweep: Sweep, configs: list[TuneConfig], rounds: int
) -> dict[TuneConfig, list[float]]:
    """Decode tok/s of each configuration, measured in turn, ``rounds`` times."""
    runs: dict[TuneConfig, list[float]] = {c: [] for c in configs}
    for r in range(1, rounds + 1):
        for c in configs:
            p = sweep.measure(c, final_round=r)
            sweep.points.append(p)
            log(point=row(p))
            if p.fits and sweep.limits.allows(p):
                runs[c].append(round(p.decode_tok_s, 2))
    return runs


def gpu_figures(
    engine: EngineClient,
    base: LoadSettings,
    desc: ModelDescription,
    budget_s: float,
    fit_args: str | None,
    *,
    quick: bool,
    full: bool,
    stages: Stages,
) -> dict[str, Any]:
    """The tuner, the walk to the edge, the interleaved comparison (and the options)."""
    hw = engine.probe()
    margin_mib = AppSettings().gpu_margin_mib
    limits = memory_limits(engine, hw, margin_mib)
    n = desc.n_layer
    out: dict[str, Any] = {
        "device": hw.gpus[0].name if hw.gpus else "GPU",
        "available_mib": round((limits.vram + limits.margin) / MIB),
        "margin_mib": round(limits.margin / MIB),
        "margin_rule": f"{margin_mib} MiB or {plan.MARGIN_SHARE:.0%} of what is available",
    }

    def report(**figures: Any) -> None:
        out.update(figures)
        log(figures=figures)

    with stages.stage("tune"):
        result = tuned(engine, base, budget_s, hw, desc)
    pick = result.pick
    report(
        pick=pick.label() if pick else None,
        pick_reason=result.reason,
        tune_s=round(result.seconds, 1),
        tune_points=len(result.points),
    )
    out["tuner_points"] = [row(p) for p in result.points]
    req = TuneRequest(base=base, budget_s=1e9, decode_tokens=DECODE_TOKENS)
    sweep = Sweep(engine, req, hw, desc, lambda: False, limits=limits)
    cores = max(plan.thread_plan(base.n_threads))
    start = replace(TuneConfig.of(base), n_threads=cores, n_threads_batch=cores)
    axis = plan.Axis(True, n)

    def at(v: int) -> TuneConfig:
        return axis.at(start, v)

    with stages.stage("edge_walk"):
        now = engine.probe()
        fit = FitSettings.of(base, overhead=sweep.overhead)
        bound = max_gpu_expert_layers(desc, with_free_vram(now, available(engine, now)[0]), fit)
        edge = _walk_to_edge(sweep, at, bound or 0, n)
        for v in range(edge - 1, max(-1, edge - 1 - BELOW_EDGE), -1) if edge is not None else ():
            sweep.points.append(p := sweep.measure(at(v)))
            log(point=row(p))
    if edge is not None:
        e = sweep.point(at(edge))
        report(
            estimate_bound=f"experts of {n - (bound or 0)} layers in RAM",
            edge=at(edge).placement_label(),
            edge_free_mib=_mib(e.free_after if e else None),
        )
        beyond = sweep.point(at(edge + 1))
        if beyond is not None:
            report(
                beyond_edge=at(edge + 1).placement_label(), beyond_edge_result=beyond.note or "fits"
            )
    ok = sorted(plan.usable(sweep.points, limits), key=lambda p: p.decode_tok_s, reverse=True)
    best = list(dict.fromkeys(p.config for p in ok))[:2]
    if pick is not None and best:
        with stages.stage("interleaved"):
            configs = list(dict.fromkeys([pick, *best]))
            runs = _interleaved(sweep, configs, 2 if quick else 4)
        med = {c: statistics.median(v) for c, v in runs.items() if v}
        top = max((c for c in best if c in med), key=lambda c: med[c], default=None)
        if pick in med and top is not None:
            report(
                pick_vs_best_ratio=round(med[pick] / max(med[top], 1e-9), 4),
                best=top.label(),
                pick_decode_tok_s=round(med[pick], 2),
                best_decode_tok_s=round(med[top], 2),
            )
        else:
            report(pick_vs_best_ratio=None, pick_failed="the pick did not run within the margin")
        report(pick_vs_best_runs={c.label(): v for c, v in runs.items()})
        frees = [p.free_after for p in sweep.points if p.config == pick and p.free_after]
        report(pick_free_mib=_mib(min(frees)) if frees else None)
    if fit_args and pick is not None:
        with stages.stage("llamacpp_fit"):
            _fit_figures(engine, base, desc, hw, pick, fit_args, report)
    if full:
        with stages.stage("whole_layers"):
            _layers_figures(engine, base, desc, sweep, cores, report, out)
    every = [*result.points, *sweep.points]
    measured = [p for p in every if p.estimate_error is not None]
    errors = [abs(p.estimate_error or 0) * 100 for p in measured]
    errors_mib = [abs((p.estimate_vram or 0) - (p.vram or 0)) / MIB for p in measured]
    report(
        estimate_vs_vram_max_pct=round(max(errors), 2) if errors else None,
        estimate_vs_vram_max_mib=round(max(errors_mib), 1) if errors_mib else None,
        not_fitting=sorted({p.config.placement_label() for p in every if not p.fits}),
        engine_alive=engine.alive,
    )
    out["sweep"] = [row(p) for p in sweep.points]
    return out


def _fit_figures(
    engine: EngineClient,
    base: LoadSettings,
    desc: ModelDescription,
    hw: Any,
    pick: TuneConfig,
    fit_args: str,
    report: Callable[..., None],
) -> None:
    """llama.cpp's own choice, its override rules loaded as they are, at the tuner's
    threads (the threads are not part of what --fit chooses)."""
    from vllmchat.bench.placement.moe_bench import fit_args_placement

    ngl, rules = fit_args_placement(fit_args)
    fit_base = base.with_changes(override_tensors=rules)
    fit_sweep = Sweep(engine, TuneRequest(base=fit_base, budget_s=1e9), hw, desc, lambda: False)
    c = pick.placed(n_gpu_layers=ngl, n_cpu_moe=0)
    p = _measure(fit_sweep, c, 2)
    kept = estimate(desc, FitSettings.of(c.apply_to(fit_base))).cpu_moe_layers
    report(
        llamacpp_fit=f"-ngl {ngl} -ot: experts of {kept} layers in RAM (some in part)",
        llamacpp_fit_decode_tok_s=round(p.decode_tok_s, 2),
        llamacpp_fit_free_mib=_mib(p.free_after),
    )


def _layers_figures(
    engine: EngineClient,
    base: LoadSettings,
    desc: ModelDescription,
    sweep: Sweep,
    cores: int,
    report: Callable[..., None],
    out: dict[str, Any],
) -> None:
    """The best placement of whole layers (no experts apart), against the walk's best."""
    now = engine.probe()
    fit = FitSettings.of(base, overhead=sweep.overhead)
    upper = max_gpu_layers(desc, with_free_vram(now, available(engine, now)[0]), fit)
    start = replace(TuneConfig.of(base), n_threads=cores, n_threads_batch=cores).placed(n_cpu_moe=0)
    layers = []
    for ngl in sorted(
        {min(upper + 1, all_layers(desc.n_layer)), *plan.layer_plan(upper, desc.n_layer)},
        reverse=True,
    ):
        sweep.points.append(p := sweep.measure(start.placed(n_gpu_layers=ngl)))
        log(point=row(p))
        layers.append(p)
    ok = plan.usable(layers, sweep.limits)
    best_layers = max(ok, key=lambda p: p.decode_tok_s, default=None)
    moe = [p for p in plan.usable(sweep.points, sweep.limits) if p.config.placement.n_cpu_moe]
    best_moe = max(moe, key=lambda p: p.decode_tok_s, default=None)
    if best_layers is not None and best_moe is not None:
        ratio = best_moe.decode_tok_s / best_layers.decode_tok_s
        report(
            best_layers_only=best_layers.config.label(),
            best_layers_only_decode_tok_s=round(best_layers.decode_tok_s, 2),
            moe_vs_layers_ratio=round(ratio, 3),
        )
    out["whole_layers"] = [row(p) for p in layers]
