"""The offload and thread tuner: measure configurations in the engine process,
within a time budget, and pick one.

Order: the placement (GPU layers, or for a mixture of experts the layers whose
experts are on the GPU) from the estimate's bound up to the edge of the card,
where a step no longer loads, measures and leaves the margin free, then the two
below it; CPU threads at the best (changed live); a whole layer or two fewer
for a mixture of experts; coarser steps to CPU-only and refinement where decode
speed changes; threads again; on a GPU the ubatch for prompt speed and, with
several GPUs, one against a split. Last, the best two or three placements are
re-measured in alternation and their medians decide. A point that does not fit
(out of memory, the engine died, or under the margin) is recorded and the sweep
goes on. Stopping ends the current measurement within a token. The previous
settings and KV state are restored.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace

from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.protocol import MeasuredEngine
from vllmchat.core.models.advisor import max_gpu_expert_layers, max_gpu_layers
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.placement import all_layers
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.edge import edge_of, find_edge, interleaved
from vllmchat.core.tuning.events import PointMeasured, TuneEvent, TuneFinished, TuneStarted
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult
from vllmchat.core.tuning.sweep import (
    Sweep,
    TuneRequest,
    available,
    memory_limits,
    with_free_vram,
)

__all__ = ["Sweep", "TuneRequest", "available", "memory_limits", "tune", "with_free_vram"]


def config_of(s: LoadSettings) -> TuneConfig:
    return TuneConfig.of(s)


def settings_for(base: LoadSettings, c: TuneConfig) -> LoadSettings:
    return c.apply_to(base)


def tune(
    engine: MeasuredEngine,
    req: TuneRequest,
    hw: HardwareInfo,
    desc: ModelDescription | None,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    restore: bool = True,
) -> Iterator[TuneEvent]:
    """Sweep, yield each measured point, finish with the result; with ``restore``
    a loaded engine gets ``req.base`` and its KV state back (also when stopped)."""
    previous = req.base if engine.alive and engine.info is not None else None  # the caller's
    state_dir = tempfile.mkdtemp(prefix="vllmchat-tune-")
    state_path = os.path.join(state_dir, "state.kv")
    saved = False
    if restore and previous is not None:
        with contextlib.suppress(EngineError):
            saved = engine.export_state(state_path).tokens > 0
    limits = memory_limits(engine, hw, req.margin_mib)
    avail_vram, _ = available(engine, hw)
    sweep = Sweep(engine, req, hw, desc, should_stop, limits=limits)
    sweep.loaded = previous  # its first point changes threads live where it can
    base = config_of(req.base)
    axis, values = _axis_plan(req, hw, desc, sweep.overhead, avail_vram)
    threads = list(req.threads) if req.threads is not None else plan.thread_plan(base.n_threads)
    if axis.experts and req.threads is None:
        # The CPU computes the experts in RAM: compare placements with every core
        # at work (measured: at half the cores the placements' speeds bunch up).
        base = replace(base, n_threads=max(threads), n_threads_batch=max(threads))
    ubatch = list(req.ubatch or (plan.UBATCH_PLAN if hw.gpu_offload else (base.n_ubatch,)))
    planned = len(values) + len(threads) - 1 + len([u for u in ubatch if u != base.n_ubatch])
    yield TuneStarted(planned, req.budget_s, _device(hw))
    try:

        def measured(point: TunePoint | None) -> Iterator[TuneEvent]:
            if point is not None:
                done = len(sweep.points)
                eta = max(0, planned - done) * sweep.mean_point_s()
                eta = min(eta, max(0.0, req.budget_s - sweep.elapsed))
                yield PointMeasured(point, done, max(planned, done), sweep.elapsed, eta)

        def at(v: int, c: TuneConfig = base) -> TuneConfig:
            return axis.at(c, v)

        explicit = req.layers is not None or req.expert_layers is not None
        if explicit or not (hw.gpu_offload and desc is not None):
            for v in values[:3]:  # 1. the given points (or CPU-only)
                yield from measured(sweep.run(at(v)))
        else:  # 1. from the estimate's bound up to the edge of the card, then just below
            for point in find_edge(sweep, at, values[0], axis.top):
                yield from measured(point)
            edge = edge_of(sweep.points, axis.value, limits)
            for v in (edge - 1, edge - 2) if edge is not None else values[1:3]:
                if v >= 0:
                    yield from measured(sweep.run(at(v)))
        if len({axis.value(p.config) for p in sweep.points}) > 1:
            # Keep time for the finalists' interleaved rounds, all of them.
            sweep.reserve_points = plan.FINALISTS * req.final_rounds

        def threads_at_best() -> Iterator[TuneEvent]:
            best, _ = plan.choose(sweep.points, base, limits)
            place = best if best is not None else base
            for t in threads:  # CPU threads there, live (they matter most when split)
                yield from measured(sweep.run(replace(place, n_threads=t, n_threads_batch=t)))

        yield from threads_at_best()  # 2.
        if axis.experts:  # 2b. the other axis: a whole layer or two fewer at the best
            best, _ = plan.choose(sweep.points, base, limits)
            for k in (1, 2):
                if best is not None and not explicit:
                    fewer = best.placed(n_gpu_layers=all_layers(axis.n_layer) - k)
                    yield from measured(sweep.run(fewer))
        for v in values[3:]:  # 3. coarser steps down to CPU-only (or all experts in RAM)
            yield from measured(sweep.run(at(v)))
        while req.refine and sweep.has_time():  # 4. where the speed changes
            curve = {
                axis.value(p.config): p.decode_tok_s
                for p in sweep.points
                if p.fits
                and (p.config.n_threads, p.config.n_ubatch) == (base.n_threads, base.n_ubatch)
            }
            mid = plan.refine_layer(curve)
            if mid is None or sweep.seen(at(mid)):
                break
            planned += 1
            yield from measured(sweep.run(at(mid)))
        yield from threads_at_best()  # 5. CPU threads at the final best, live
        best, _ = plan.choose(sweep.points, base, limits)
        if best is not None:
            for u in ubatch:  # 6. prompt speed per ubatch
                yield from measured(sweep.run(replace(best, n_ubatch=u)))
        best, _ = plan.choose(sweep.points, base, limits)
        if best is not None and len(hw.gpus) > 1:  # 7. one GPU against a split
            for split in plan.split_plan(len(hw.gpus)):
                yield from measured(sweep.run(best.placed(tensor_split=split)))
        sweep.reserve_points = 0
        finals = plan.finalists(sweep.points, limits, base) if req.final_rounds > 0 else []
        planned += len(finals) * req.final_rounds
        for point in interleaved(sweep, finals, req.final_rounds):  # 8. medians decide
            yield from measured(point)
        pick, why = plan.choose(sweep.points, base, limits)
        result = TuneResult(
            points=tuple(sweep.points),
            pick=pick,
            reason=why,
            seconds=sweep.elapsed,
            stopped=sweep.stopped,
            budget_s=req.budget_s,
            memory_limit=limits.vram or limits.ram,
            device=_device(hw),
            margin=limits.margin,
        )
    finally:
        if restore and previous is not None:
            _restore(engine, previous, state_path if saved else None)
        with contextlib.suppress(OSError):
            for name in os.listdir(state_dir):
                os.unlink(os.path.join(state_dir, name))
            os.rmdir(state_dir)
    yield TuneFinished(result)


def _axis_plan(
    req: TuneRequest,
    hw: HardwareInfo,
    desc: ModelDescription | None,
    overhead: int,
    avail_vram: int,
) -> tuple[plan.Axis, list[int]]:
    """What to walk and where to start: for a mixture of experts on a GPU, the
    layers whose experts join their attention there; else whole GPU layers."""
    n_layer = desc.n_layer if desc is not None else 0
    if req.expert_layers is not None:
        return plan.Axis(True, n_layer), list(req.expert_layers)
    if req.layers is not None:
        return plan.Axis(False, n_layer), list(req.layers)
    if not (hw.gpu_offload and desc is not None):
        return plan.Axis(False, n_layer), [0]
    fit = FitSettings.of(req.base, overhead=overhead)
    free = with_free_vram(hw, avail_vram)
    if desc.is_moe:
        g = max_gpu_expert_layers(desc, free, fit)
        if g is not None:
            return plan.Axis(True, n_layer), plan.layer_plan(g, n_layer, top=n_layer)
    upper = max_gpu_layers(desc, free, fit)
    return plan.Axis(False, n_layer), plan.layer_plan(upper, n_layer)


def _restore(engine: MeasuredEngine, settings: LoadSettings, state_path: str | None) -> None:
    try:
        if not engine.alive:
            engine.start()
        engine.load(settings)
        if state_path:
            engine.import_state(state_path)
    except EngineError:
        pass  # the caller sees a dead or unloaded engine and reports it


def _device(hw: HardwareInfo) -> str:
    return hw.gpus[0].name if hw.gpu_offload and hw.gpus else "CPU"
