"""Which configurations a careful person would measure, and which one to take."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vllmchat.core.placement import Placement
from vllmchat.core.tuning.results import TuneConfig, TunePoint

SAME_SPEED = 0.98  # within 2% of the best decode, fewer GPU layers win
REFINE_STEP = 0.10  # refine between neighbours whose decode differs more than this


@dataclass(frozen=True)
class Axis:
    """The placement a sweep walks: whole GPU layers, or (a mixture of experts with
    every layer's attention on the GPU) the layers whose experts are on the GPU too."""

    experts: bool
    n_layer: int

    @property
    def top(self) -> int:
        return self.n_layer if self.experts else self.n_layer + 1

    def at(self, base: TuneConfig, value: int) -> TuneConfig:
        if self.experts:
            placed = Placement.of(base).with_all_layers(self.n_layer)
            return placed.with_expert_layers_on_gpu(value, self.n_layer).onto(base)
        return replace(base, n_gpu_layers=value)

    def value(self, c: TuneConfig) -> int:
        if self.experts:
            return Placement.of(c).expert_layers_on_gpu(self.n_layer)
        return c.n_gpu_layers

    @property
    def name(self) -> str:
        return "expert layers on the GPU" if self.experts else "GPU layers"


def layer_plan(upper: int, n_layer: int, *, top: int | None = None) -> list[int]:
    """The advisor's upper bound first, the points just below it, then coarser
    steps down to CPU-only (``top``: the largest value, ``n_layer + 1`` by default)."""
    upper = max(0, min(upper, n_layer + 1 if top is None else top))
    points = [upper, upper - 1, upper - 2]
    points += [round(upper * f) for f in (0.75, 0.5, 0.25)] + [0]
    out: list[int] = []
    for p in points:
        if p >= 0 and p not in out:
            out.append(p)
    return out


def refine_layer(measured: dict[int, float]) -> int | None:
    """A layer count between two measured neighbours whose decode speeds differ most
    (by more than ``REFINE_STEP``), or None when the curve is smooth enough."""
    layers = sorted(measured)
    best: tuple[float, int] | None = None
    for lo, hi in itertools.pairwise(layers):
        if hi - lo < 2:
            continue
        a, b = measured[lo], measured[hi]
        change = abs(a - b) / max(a, b, 1e-9)
        if change > REFINE_STEP and (best is None or change > best[0]):
            best = (change, (lo + hi) // 2)
    return best[1] if best else None


def thread_plan(current: int, cores: int | None = None) -> list[int]:
    """Thread counts worth trying: all cores, one less, three quarters, half."""
    cores = cores or os.cpu_count() or 1
    wanted = [cores, cores - 1, (cores * 3) // 4, cores // 2, current]
    return sorted({t for t in wanted if 1 <= t <= cores}, reverse=True)


UBATCH_PLAN = (256, 512, 1024, 2048)


def split_plan(n_gpus: int) -> list[str]:
    """With several GPUs: the first alone, and llama.cpp's split by free memory."""
    return [",".join(["1"] + ["0"] * (n_gpus - 1)), ""] if n_gpus > 1 else []


def choose(
    points: Sequence[TunePoint], base: TuneConfig, limits: MemoryLimits
) -> tuple[TuneConfig | None, str]:
    """The pick and why: the fastest decode that fits within ``limit`` (fewer GPU
    layers when within 2%), the decode and prompt thread counts that were fastest
    there, and the ubatch with the fastest prompt processing."""
    fitting = [p for p in points if p.fits and limits.allows(p)]
    if not fitting:
        return None, "No measured configuration fits in memory."
    baseline = [
        p
        for p in fitting
        if (p.config.n_threads, p.config.n_ubatch) == (base.n_threads, base.n_ubatch)
    ] or fitting
    best = max(p.decode_tok_s for p in baseline)
    close = [p for p in baseline if p.decode_tok_s >= SAME_SPEED * best]
    place = min(p.config.placement for p in close)
    at_place = [p for p in fitting if p.config.placement == place]
    decode = max(at_place, key=lambda p: p.decode_tok_s)
    prefill = max(at_place, key=lambda p: p.prefill_tok_s)
    pick = replace(decode.config, n_threads_batch=prefill.config.n_threads_batch,
                   n_ubatch=prefill.config.n_ubatch)  # fmt: skip
    fastest = max(baseline, key=lambda p: p.decode_tok_s)
    why = f"{decode.decode_tok_s:.1f} tok/s decode with {pick.placement_label()}"
    if fastest.config.placement != place:
        why += (
            f" (within 2% of {fastest.decode_tok_s:.1f} tok/s at "
            f"{fastest.config.placement_label()}, leaving memory for other programs)"
        )
    return pick, why + "."


@dataclass(frozen=True)
class MemoryLimits:
    """What a configuration may use: device memory (0: no GPU) and RAM, in bytes,
    with the context's whole KV cache (allocated at load) already counted."""

    vram: int = 0
    ram: int = 0

    def allows(self, p: TunePoint) -> bool:
        if self.vram > 0 and p.config.n_gpu_layers > 0:
            used = p.vram if p.vram is not None else p.vram_buffers
            if used > self.vram:
                return False
        return self.ram <= 0 or p.ram <= self.ram
