"""Which configurations a careful person would measure, and which one to take."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vllmchat.core.placement import all_layers
from vllmchat.core.settings import usable_cores
from vllmchat.core.tuning.results import TuneConfig, TunePoint

SAME_SPEED = 0.98  # within 2% of the best decode, fewer GPU layers win
REFINE_STEP = 0.10  # refine between neighbours whose decode differs more than this
MARGIN_SHARE = 0.03  # device memory kept free: this share of what is available, at least
FINALIST_SPAN = 0.90  # placements within 10% of the best decode are re-measured
FINALISTS = 3  # at most this many
SETTLE = 0.05  # finalists whose medians are this close get more rounds, up to
SETTLE_ROUNDS = 4
LINE_REACH = 4  # placements this many steps beyond the finalists join their line
# Another thread count replaces the base one only when its mean decode is this much
# faster: one decode on a busy CPU varies by several percent (measured: 5-10% at
# 16 threads on a 16-core host).
THREAD_GAIN = 1.05
_MIB = 1 << 20
_MEMORY_FAILURES = ("oom_load", "oom_generate", "engine_died")


def margin_for(available: int, floor_mib: int) -> int:
    """Device memory to keep free: ``floor_mib`` MiB or ``MARGIN_SHARE`` of what is
    available, whichever is larger (0 without device memory)."""
    return max(floor_mib * _MIB, int(available * MARGIN_SHARE)) if available > 0 else 0


@dataclass(frozen=True)
class Axis:
    """The placement a sweep walks: whole GPU layers, or (a mixture of experts with
    every layer's attention on the GPU) the layers whose experts are on the GPU too."""

    experts: bool
    n_layer: int

    @property
    def top(self) -> int:
        return self.n_layer if self.experts else all_layers(self.n_layer)

    def at(self, base: TuneConfig, value: int) -> TuneConfig:
        if self.experts:
            placed = base.placement.with_all_layers(self.n_layer)
            return replace(base, placement=placed.with_expert_layers_on_gpu(value, self.n_layer))
        return base.placed(n_gpu_layers=value)

    def value(self, c: TuneConfig) -> int:
        if self.experts:
            return c.placement.expert_layers_on_gpu(self.n_layer)
        return c.placement.n_gpu_layers

    @property
    def name(self) -> str:
        return "expert layers on the GPU" if self.experts else "GPU layers"


def layer_plan(upper: int, n_layer: int, *, top: int | None = None) -> list[int]:
    """The advisor's upper bound first, the points just below it, then coarser
    steps down to CPU-only (``top``: the largest value, ``all_layers(n_layer)`` by default)."""
    upper = max(0, min(upper, all_layers(n_layer) if top is None else top))
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
    cores = cores or usable_cores()
    wanted = [cores, cores - 1, (cores * 3) // 4, cores // 2, current]
    return sorted({t for t in wanted if 1 <= t <= cores}, reverse=True)


UBATCH_PLAN = (256, 512, 1024, 2048)


def split_plan(n_gpus: int) -> list[str]:
    """With several GPUs: the first alone, and llama.cpp's split by free memory."""
    return [",".join(["1"] + ["0"] * (n_gpus - 1)), ""] if n_gpus > 1 else []


def _memory_key(c: TuneConfig) -> TuneConfig:
    """What decides a configuration's memory (threads do not)."""
    return replace(c, n_threads=0, n_threads_batch=0)


def usable(points: Sequence[TunePoint], limits: MemoryLimits) -> list[TunePoint]:
    """Points that ran within the limits, at configurations that never ran out of
    memory, killed the engine or left less free than the margin."""
    bad = {
        _memory_key(p.config)
        for p in points
        if (p.fits and not limits.allows(p)) or (not p.fits and p.error_kind in _MEMORY_FAILURES)
    }
    return [p for p in points if p.fits and _memory_key(p.config) not in bad]


def final_medians(points: Sequence[TunePoint]) -> dict[TuneConfig, tuple[float, int]]:
    """The finalists' median decode tok/s over their interleaved re-measurements,
    with the number of rounds (a finalist that failed a round is left out)."""
    runs: dict[TuneConfig, list[float]] = {}
    failed = set()
    for p in points:
        if p.final_round and p.fits:
            runs.setdefault(p.config, []).append(p.decode_tok_s)
        elif p.final_round:
            failed.add(p.config)
    return {c: (statistics.median(v), len(v)) for c, v in runs.items() if c not in failed}


def line_speeds(
    points: Sequence[TunePoint], medians: dict[TuneConfig, tuple[float, int]], base: TuneConfig
) -> dict[TuneConfig, tuple[float, int]]:
    """The finalists' decode tok/s, and how many readings decided it (0: its median).

    Finalists that differ only in how many layers keep their experts in RAM lie on a
    line: a token's time grows by one layer's experts read from RAM a step. A straight
    line of seconds per token against those layers, fitted to every reading at the
    base threads from ``LINE_REACH`` steps below the finalists to as far above (three
    placements or more), pools ten to twenty readings where a median has a finalist's
    own three to five. Whole layers on the CPU cost unevenly (the output layer), so
    their finalists keep their medians."""
    speeds = {c: (m, 0) for c, (m, _) in medians.items()}
    reach: dict[tuple[int, str], tuple[int, int]] = {}
    moving = {
        (c.placement.n_gpu_layers, c.placement.tensor_split)
        for c in medians
        if c.placement.n_cpu_moe
    }
    for c in medians:  # every expert on the GPU is the line's end
        line = (c.placement.n_gpu_layers, c.placement.tensor_split)
        if line in moving:
            low, high = reach.get(line, (c.placement.n_cpu_moe, c.placement.n_cpu_moe))
            reach[line] = (min(low, c.placement.n_cpu_moe), max(high, c.placement.n_cpu_moe))
    lines: dict[tuple[int, str], list[tuple[int, float]]] = {}
    for p in points:
        c = p.config
        line, alike = (
            (c.placement.n_gpu_layers, c.placement.tensor_split),
            (c.n_threads, c.n_ubatch),
        )
        if (
            p.fits
            and p.decode_tok_s > 0
            and line in reach
            and alike == (base.n_threads, base.n_ubatch)
        ):
            low, high = reach[line]
            if low - LINE_REACH <= c.placement.n_cpu_moe <= high + LINE_REACH:
                lines.setdefault(line, []).append((c.placement.n_cpu_moe, 1.0 / p.decode_tok_s))
    for line, readings in lines.items():
        xs = [x for x, _ in readings]
        if len(set(xs)) < 3:
            continue
        mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in readings)
        slope = sum((x - mx) * (y - my) for x, y in readings) / sum((x - mx) ** 2 for x in xs)
        for c in medians:
            seconds = my + slope * (c.placement.n_cpu_moe - mx)
            if (c.placement.n_gpu_layers, c.placement.tensor_split) == line and seconds > 0:
                speeds[c] = (1.0 / seconds, len(readings))
    return speeds


def finalists(
    points: Sequence[TunePoint], limits: MemoryLimits, base: TuneConfig
) -> list[TuneConfig]:
    """The placement with the most on the GPU that fits (the edge: by how decode works
    it is the fastest, whatever one busy measurement said), then the best few within
    ``FINALIST_SPAN`` of the fastest decode, ``FINALISTS`` in all, each at the base
    threads and ubatch where it was measured there (placements compared alike); fewer
    than two: nothing to settle."""
    best: dict[tuple[tuple[int, int], str], TunePoint] = {}
    alike: dict[tuple[tuple[int, int], str], TuneConfig] = {}
    for p in usable(points, limits):
        key = (p.config.gpu_rank, p.config.placement.tensor_split)
        if key not in best or p.decode_tok_s > best[key].decode_tok_s:
            best[key] = p
        if (p.config.n_threads, p.config.n_ubatch) == (base.n_threads, base.n_ubatch):
            alike[key] = p.config
    ranked = sorted(best, key=lambda k: best[k].decode_tok_s, reverse=True)
    if len(ranked) < 2:
        return []
    top = best[ranked[0]].decode_tok_s
    edge = max(best, key=lambda k: k[0])
    keys = [edge] + [k for k in ranked if k != edge and best[k].decode_tok_s >= FINALIST_SPAN * top]
    chosen = [alike.get(k, best[k].config) for k in keys[:FINALISTS]]
    return chosen if len(chosen) > 1 else []


def unsettled(medians: dict[TuneConfig, tuple[float, int]]) -> list[TuneConfig]:
    """The two fastest finalists when their medians are within ``SETTLE`` of each
    other (more rounds may tell them apart), else none."""
    ranked = sorted(medians, key=lambda c: medians[c][0], reverse=True)
    if len(ranked) < 2 or medians[ranked[1]][0] < (1 - SETTLE) * medians[ranked[0]][0]:
        return []
    return ranked[:2]


def choose(
    points: Sequence[TunePoint], base: TuneConfig, limits: MemoryLimits
) -> tuple[TuneConfig | None, str]:
    """The pick and why: the fastest decode that fits and leaves the margin free (fewer
    GPU layers when within 2%: by the finalists' interleaved rounds where they were
    re-measured, read from the experts' line where they lie on one), the decode and
    prompt thread counts that were fastest there, and the ubatch with the fastest
    prompt processing."""
    fitting = usable(points, limits)
    if not fitting:
        why = "No measured configuration fits in memory"
        if limits.margin:
            why += f" with {limits.margin / _MIB:.0f} MiB left free"
        return None, why + "."
    ok = {p.config for p in fitting}
    finals = {c: m for c, m in final_medians(points).items() if c in ok}
    if len(finals) > 1:
        judged = line_speeds(points, finals, base)
        fastest_c = max(finals, key=lambda c: judged[c][0])
        fastest_speed = judged[fastest_c][0]
        decode_c = min(
            (c for c in finals if judged[c][0] >= SAME_SPEED * fastest_speed),
            key=lambda c: c.gpu_rank,
        )
        (speed, on_line), (median, rounds) = judged[decode_c], finals[decode_c]
        how = f" (median of {rounds} interleaved runs)"
        if on_line:
            how = (
                f" (on the line through {on_line} readings of the experts' placements; "
                f"median of {rounds} interleaved runs {median:.1f})"
            )
    else:
        baseline = [
            p
            for p in fitting
            if (p.config.n_threads, p.config.n_ubatch) == (base.n_threads, base.n_ubatch)
        ] or fitting
        best = max(p.decode_tok_s for p in baseline)
        close = [p for p in baseline if p.decode_tok_s >= SAME_SPEED * best]
        place = min(p.config.gpu_rank for p in close)
        at_place = [p for p in fitting if p.config.gpu_rank == place]
        decode = max(at_place, key=lambda p: p.decode_tok_s)
        fastest = max(baseline, key=lambda p: p.decode_tok_s)
        decode_c, speed, how = decode.config, decode.decode_tok_s, ""
        fastest_c, fastest_speed = fastest.config, fastest.decode_tok_s
    # Threads at that placement: by every reading there (the rounds are at the base
    # threads); the ubatch by the sweep's own, taken one after another on one load.
    same = [p for p in fitting if p.config.placement == decode_c.placement]
    own = [p for p in same if not p.final_round] or same
    decode_c = _threads_there(same, base)
    prefill = max(own, key=lambda p: p.prefill_tok_s)
    pick = replace(
        decode_c, n_threads_batch=prefill.config.n_threads_batch, n_ubatch=prefill.config.n_ubatch
    )
    why = f"{speed:.1f} tok/s decode{how} with {pick.placement_label()}"
    if fastest_c.gpu_rank != decode_c.gpu_rank:
        why += (
            f" (within 2% of {fastest_speed:.1f} tok/s at "
            f"{fastest_c.placement_label()}, leaving memory for other programs)"
        )
    over = [p for p in points if p.under_margin and p.decode_tok_s > speed]
    if over:
        q = max(over, key=lambda p: p.decode_tok_s)
        why += (
            f"; {q.config.placement_label()} decoded {q.decode_tok_s:.1f} tok/s but left "
            f"{(q.free_after or 0) / _MIB:.0f} MiB free, under the {q.margin / _MIB:.0f} MiB margin"
        )
    return pick, why + "."


def _threads_there(own: Sequence[TunePoint], base: TuneConfig) -> TuneConfig:
    """The configuration at one placement with the decode threads to keep: the base
    count unless another's mean decode over its readings there beat the base count's
    by more than ``THREAD_GAIN`` (the best reading of the count kept stands for it)."""
    by_count: dict[int, list[TunePoint]] = {}
    for p in own:
        by_count.setdefault(p.config.n_threads, []).append(p)
    mean = {n: statistics.fmean(p.decode_tok_s for p in ps) for n, ps in by_count.items()}
    fastest = max(mean, key=lambda n: mean[n])
    kept = base.n_threads if base.n_threads in mean else fastest
    if mean[fastest] > THREAD_GAIN * mean[kept]:
        kept = fastest
    return max(by_count[kept], key=lambda p: p.decode_tok_s).config


@dataclass(frozen=True)
class MemoryLimits:
    """What a configuration may use: device memory (0: no GPU) and RAM, in bytes,
    with the context's whole KV cache (allocated at load) already counted; and the
    device memory it must leave free (checked against the free memory measured
    after its load and measurement, where that was read)."""

    vram: int = 0
    ram: int = 0
    margin: int = 0

    def allows(self, p: TunePoint) -> bool:
        if p.config.placement.uses_gpu:
            if p.free_after is not None:
                if p.free_after < self.margin:
                    return False
            elif self.vram > 0:
                used = p.vram if p.vram is not None else p.vram_buffers
                if used > self.vram:
                    return False
        return self.ram <= 0 or p.ram <= self.ram
