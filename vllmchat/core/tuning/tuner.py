"""The offload and thread tuner: measure configurations in the engine process,
within a time budget, and pick one.

Order: GPU layers (the advisor's bound, just below it, coarser steps to 0,
then refinement where decode speed changes), CPU threads at the best layer
count (changed live), and on a GPU the ubatch for prompt speed. A point that
does not fit (out of memory, or over the memory limit) is recorded and the
sweep goes on; an engine that died is restarted. Stopping ends the current
measurement within a token. The previous settings and KV state are restored.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import MeasuredEngine
from vllmchat.core.models.advisor import max_gpu_expert_layers, max_gpu_layers
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import FitSettings, estimate
from vllmchat.core.models.overhead import learn_overhead, learned_overhead
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.events import PointMeasured, TuneEvent, TuneFinished, TuneStarted
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult

_OOM = (ErrorKind.OOM_LOAD, ErrorKind.OOM_GENERATE, ErrorKind.ENGINE_DIED)
MARGIN = 0.02  # of the device memory available, kept free (at least MARGIN_MIN)
MARGIN_MIN = 128 << 20


@dataclass(frozen=True)
class TuneRequest:
    """What to tune and how long; explicit point lists replace the planned ones."""

    base: LoadSettings
    budget_s: float = 60.0
    prompt_tokens: int = 512
    decode_tokens: int = 64
    layers: tuple[int, ...] | None = None
    # A mixture of experts: layers whose experts are on the GPU (every layer offloaded).
    expert_layers: tuple[int, ...] | None = None
    threads: tuple[int, ...] | None = None
    ubatch: tuple[int, ...] | None = None
    refine: bool = True


def config_of(s: LoadSettings) -> TuneConfig:
    return TuneConfig.of(s)


def settings_for(base: LoadSettings, c: TuneConfig) -> LoadSettings:
    return c.apply_to(base)


class Sweep:
    """Measures configurations one by one on an engine, keeping the points."""

    def __init__(
        self,
        engine: MeasuredEngine,
        req: TuneRequest,
        hw: HardwareInfo,
        desc: ModelDescription | None,
        should_stop: Callable[[], bool],
    ) -> None:
        self.engine, self.req, self.hw, self.desc = engine, req, hw, desc
        self.should_stop = should_stop
        self.points: list[TunePoint] = []
        self.t0 = time.perf_counter()
        self.stopped = False
        self.on_gpu = hw.gpu_offload
        self.overhead = learned_overhead(hw)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def mean_point_s(self) -> float:
        done = [p.seconds for p in self.points if p.seconds > 0]
        return sum(done) / len(done) if done else 0.0

    def has_time(self) -> bool:
        """Whether another point fits in the budget (the first always runs)."""
        if self.should_stop():
            self.stopped = True
        if self.stopped:
            return False
        return not self.points or self.elapsed + self.mean_point_s() <= self.req.budget_s

    def seen(self, c: TuneConfig) -> bool:
        return any(p.config == c for p in self.points)

    def estimate_vram(self, c: TuneConfig) -> int | None:
        if self.desc is None or not self.on_gpu:
            return None
        fit = FitSettings.of(settings_for(self.req.base, c), overhead=self.overhead)
        return estimate(self.desc, fit).vram

    def measure(self, c: TuneConfig) -> TunePoint:
        """Load (or change threads live) and measure one configuration."""
        start = time.perf_counter()
        settings = settings_for(self.req.base, c)
        est = self.estimate_vram(c)
        try:
            current = self.engine.settings if self.engine.alive and self.engine.info else None
            live = current is not None and settings == current.with_changes(
                n_threads=c.n_threads, n_threads_batch=c.n_threads_batch
            )
            if live:
                self.engine.set_threads(c.n_threads, c.n_threads_batch)
            else:
                self.engine.load(settings)
            sample = self.engine.measure(self.req.prompt_tokens, self.req.decode_tokens)
            mem = self.engine.memory()
        except EngineError as exc:
            if exc.message == "aborted" or self.should_stop():
                self.stopped = True
            if exc.kind in _OOM or not self.engine.alive:
                # A fresh process: a failed allocation can leave device memory held.
                self.engine.close()
                self.engine.settings = self.engine.info = None
                with contextlib.suppress(EngineError):
                    self.engine.start()
            if self.stopped:
                note = "stopped"
            elif exc.kind in _OOM:
                note = f"does not fit: {exc.message}"
            else:
                note = f"failed: {exc.message}"
            return TunePoint(c, False, estimate_vram=est, note=note,
                             seconds=time.perf_counter() - start)  # fmt: skip
        point = TunePoint(
            c,
            True,
            prefill_tok_s=sample.prefill_tok_s,
            decode_tok_s=sample.decode_tok_s,
            vram=mem.vram if self.on_gpu else None,
            vram_buffers=mem.vram_buffers,
            ram=mem.rss,
            estimate_vram=est,
            seconds=time.perf_counter() - start,
        )
        if self.on_gpu and mem.vram is not None and est is not None and c.n_gpu_layers > 0:
            learn_overhead(self.hw, mem.vram, est, self.overhead)
        return point

    def run(self, c: TuneConfig) -> TunePoint | None:
        if self.seen(c) or not self.has_time():
            return None
        point = self.measure(c)
        if point.note == "stopped":
            return None
        self.points.append(point)
        return point


def available(engine: MeasuredEngine, hw: HardwareInfo) -> tuple[int, int]:
    """Device memory and RAM a configuration may use: what is free plus what the
    engine process holds now (its model, and its GPU runtime context)."""
    held_vram = held_ram = 0
    if engine.alive:
        with contextlib.suppress(EngineError):
            mem = engine.memory()
            held_vram = mem.vram if mem.vram is not None else mem.vram_buffers
            held_ram = mem.rss if engine.info is not None else 0
    vram = hw.vram_free + held_vram if hw.gpu_offload else 0
    return vram, hw.ram_available + held_ram


def memory_limits(engine: MeasuredEngine, hw: HardwareInfo) -> plan.MemoryLimits:
    """What a configuration may use, a margin kept free."""
    vram, ram = available(engine, hw)
    margin = max(MARGIN_MIN, int(vram * MARGIN))
    return plan.MemoryLimits(max(0, vram - margin) if vram else 0, int(ram * (1 - MARGIN)))


def with_free_vram(hw: HardwareInfo, vram: int) -> HardwareInfo:
    """``hw`` with ``vram`` bytes free on its first GPU (for the advisor's bound)."""
    if not hw.gpus:
        return hw
    first = replace(hw.gpus[0], free=max(0, vram - sum(g.free for g in hw.gpus[1:])))
    return replace(hw, gpus=[first, *hw.gpus[1:]])


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
    the engine gets its previous settings and KV state back (also when stopped)."""
    previous = engine.settings if engine.alive and engine.info is not None else None
    state_dir = tempfile.mkdtemp(prefix="vllmchat-tune-")
    state_path = os.path.join(state_dir, "state.kv")
    saved = False
    if restore and previous is not None:
        with contextlib.suppress(EngineError):
            saved = engine.export_state(state_path).tokens > 0
    limits = memory_limits(engine, hw)
    avail_vram, _ = available(engine, hw)
    sweep = Sweep(engine, req, hw, desc, should_stop)
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

        for v in values[:3]:  # 1. the bound and just below, at the current threads
            yield from measured(sweep.run(at(v)))
        explicit = req.layers is not None or req.expert_layers is not None
        while not explicit and sweep.has_time():  # 1b. above a bound that fit
            top = max((p for p in sweep.points if p.fits), key=lambda p: axis.value(p.config),
                      default=None)  # fmt: skip
            v = axis.value(top.config) + 1 if top is not None and axis.value(top.config) else 0
            if not 0 < v <= axis.top or sweep.seen(at(v)):
                break
            if top is not None and not limits.allows(top):
                break
            planned += 1
            point = sweep.run(at(v))
            yield from measured(point)
            if point is None or not (point.fits and limits.allows(point)):
                break

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
                    fewer = replace(best, n_gpu_layers=axis.n_layer + 1 - k)
                    yield from measured(sweep.run(fewer))
        for v in values[3:]:  # 3. coarser steps down to CPU-only (or all experts in RAM)
            yield from measured(sweep.run(at(v)))
        while req.refine and sweep.has_time():  # 4. where the speed changes
            curve = {axis.value(p.config): p.decode_tok_s for p in sweep.points
                     if p.fits and (p.config.n_threads, p.config.n_ubatch)
                     == (base.n_threads, base.n_ubatch)}  # fmt: skip
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
                yield from measured(sweep.run(replace(best, tensor_split=split)))
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
