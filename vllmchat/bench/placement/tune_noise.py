"""The tuner's pick under noisy readings: the real tuner on a card this machine does
not have (``fake_card.py``), whose decode speeds follow a model fitted to the H200
readings of the gpt-oss-20b shape and scatter from reading to reading as they did
there (5-10% at 16 threads).

For each card size (the edge: the most expert layers that fit) and noise level,
``SEEDS`` tunes report the true speed of the pick over the true speed of the best
placement that fits (``pick_vs_best``), and the same for the pick the single
readings alone would have made (without the finalists' interleaved medians). A
simulation of the rule, not a GPU figure: ``bench moe --free-gib N`` on a GPU is.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any, cast

import numpy as np

from vllmchat.bench.placement.fake_card import FakeGpuEngine, scaled_moe
from vllmchat.core.engine.protocol import MeasuredEngine
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.memory import MIB
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.events import TuneFinished
from vllmchat.core.tuning.results import TuneConfig
from vllmchat.core.tuning.tuner import TuneRequest, tune

N_LAYER = 24  # gpt-oss-20b's layers
# Seconds a token: fixed work, and one more layer's experts read by the CPU (fitted to
# the H200's 89.9 tok/s with 16 layers' experts in RAM and 72.0 with 21).
FIXED_S, PER_CPU_LAYER_S = 0.002275, 0.000553
THREADS = {16: 1.0, 12: 0.97, 8: 0.88}  # decode speed by thread count, against 16
EDGES = {"4 GiB": 3, "6 GiB": 8, "8 GiB": 12, "16 GiB": 24}  # expert layers on the GPU
NOISE = (0.05, 0.07, 0.10)
SEEDS = 100
SETTINGS = LoadSettings(model_path="scaled.gguf", n_ctx=8192, n_threads=16, flash_attn=True)
AXIS = plan.Axis(True, N_LAYER)


def true_speed(c: TuneConfig) -> float:
    """Decode tok/s without noise: fewer layers' experts in RAM is faster; a layer
    left off the GPU whole costs half."""
    if not c.placement.all_on_gpu(N_LAYER):
        return 0.5 / (FIXED_S + PER_CPU_LAYER_S * N_LAYER)
    in_ram = N_LAYER - AXIS.value(c)
    return THREADS.get(c.n_threads, 0.8) / (FIXED_S + PER_CPU_LAYER_S * in_ram)


def _card(desc: ModelDescription, edge: int, noise: float, seed: int) -> FakeGpuEngine:
    rng = np.random.default_rng(seed)

    def speed(c: TuneConfig, runs: int) -> float:
        return true_speed(c) * float(np.exp(rng.normal(0.0, noise)))

    base = TuneConfig.of(SETTINGS)
    probe = FakeGpuEngine(desc, free=0, speed=speed)
    need = probe.needs(AXIS.at(base, edge).apply_to(SETTINGS)) + probe.pool
    above = max(300 * MIB, plan.margin_for(need, GPU_MARGIN_MIB) * 11 // 10 + 64 * MIB)
    return FakeGpuEngine(desc, free=need + above, speed=speed)  # the edge keeps the margin


def _one(desc: ModelDescription, edge: int, noise: float, seed: int) -> tuple[float, float]:
    """(pick ÷ best, single readings' pick ÷ best) of one tune."""
    engine = _card(desc, edge, noise, seed)
    req = TuneRequest(base=SETTINGS, budget_s=600.0, threads=tuple(THREADS), ubatch=(512,))
    measured = cast(MeasuredEngine, engine)  # it has the parts the tuner uses
    events = list(tune(measured, req, engine.probe(), desc, restore=False))
    result = events[-1]
    assert isinstance(result, TuneFinished) and result.result.pick is not None
    best = true_speed(AXIS.at(TuneConfig.of(SETTINGS), edge))
    singles = [p for p in result.result.points if not p.final_round]
    single, _ = plan.choose(
        singles, TuneConfig.of(SETTINGS), plan.MemoryLimits(margin=result.result.margin)
    )
    single_ratio = true_speed(single) / best if single is not None else 0.0
    return true_speed(result.result.pick) / best, single_ratio


def run(seeds: int = SEEDS) -> dict[str, Any]:
    """The figures for every card size and noise level."""
    out: dict[str, Any] = {"seeds": seeds, "model": f"gpt-oss-20b-like, {N_LAYER} layers"}
    with tempfile.TemporaryDirectory(prefix="vllmchat-tune-noise-") as tmp:
        desc = scaled_moe(Path(tmp), n_layer=N_LAYER, expert_mib=512)
        for size, edge in EDGES.items():
            for noise in NOISE:
                pairs = [_one(desc, edge, noise, seed) for seed in range(seeds)]
                picks, singles = [p for p, _ in pairs], [s for _, s in pairs]
                key = f"{size.replace(' ', '')}_noise{round(noise * 100)}"
                out[f"pick_vs_best_median_{key}"] = round(statistics.median(picks), 3)
                out[f"pick_vs_best_min_{key}"] = round(min(picks), 3)
                out[f"share_at_least_0.97_{key}"] = round(sum(p >= 0.97 for p in picks) / seeds, 3)
                out[f"single_readings_share_0.97_{key}"] = round(
                    sum(s >= 0.97 for s in singles) / seeds, 3
                )
    return out
