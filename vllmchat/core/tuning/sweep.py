"""One measurement at a time: load a configuration (or change threads live), measure
its speed, and read the device memory it left free.

A point that does not fit (out of memory, or the engine died) is recorded with the
free memory last read and the engine is replaced by a fresh process; stopping ends
the current measurement within a token.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import MeasuredEngine
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.models.overhead import learn_overhead, learned_overhead
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.results import TuneConfig, TunePoint

_OOM = (ErrorKind.OOM_LOAD, ErrorKind.OOM_GENERATE, ErrorKind.ENGINE_DIED)
RAM_MARGIN = 0.02  # of the RAM available, kept free


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
    # Device memory kept free: this many MiB or plan.MARGIN_SHARE of what is available.
    margin_mib: int = GPU_MARGIN_MIB
    final_rounds: int = 3  # interleaved re-measurements of the finalists (0: none)
    final_decode_tokens: int = 128  # decoded per re-measurement (less noise than a sweep's)


def free_on_cards(hw: HardwareInfo, tensor_split: str) -> int | None:
    """The least free memory among the GPUs a configuration uses (all of them unless
    its split gives some none); None without GPUs."""
    if not (hw.gpu_offload and hw.gpus):
        return None
    shares = [float(x) for x in tensor_split.split(",")] if tensor_split.strip() else []
    used = [g for i, g in enumerate(hw.gpus) if not shares or (i < len(shares) and shares[i] > 0)]
    return min(g.free for g in used or hw.gpus)


class Sweep:
    """Measures configurations one by one on an engine, keeping the points."""

    def __init__(
        self,
        engine: MeasuredEngine,
        req: TuneRequest,
        hw: HardwareInfo,
        desc: ModelDescription | None,
        should_stop: Callable[[], bool],
        *,
        limits: plan.MemoryLimits | None = None,
    ) -> None:
        self.engine, self.req, self.hw, self.desc = engine, req, hw, desc
        self.should_stop = should_stop
        self.limits = limits or plan.MemoryLimits()
        self.points: list[TunePoint] = []
        self.t0 = time.perf_counter()
        self.stopped = False
        self.on_gpu = hw.gpu_offload
        self.overhead = learned_overhead(hw)
        self.loaded: LoadSettings | None = None  # what this sweep last loaded (threads live)
        self.reserve_points = 0  # points kept back from the budget (the finalists' rounds)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def mean_point_s(self) -> float:
        done = [p.seconds for p in self.points if p.seconds > 0]
        return sum(done) / len(done) if done else 0.0

    def has_time(self, reserve_points: int | None = None) -> bool:
        """Whether another point fits in the budget, the reserve kept back (the first
        point always runs)."""
        if self.should_stop():
            self.stopped = True
        if self.stopped:
            return False
        keep = self.reserve_points if reserve_points is None else reserve_points
        need = self.mean_point_s() * (1 + keep)
        return not self.points or self.elapsed + need <= self.req.budget_s

    def seen(self, c: TuneConfig) -> bool:
        return any(p.config == c for p in self.points)

    def point(self, c: TuneConfig) -> TunePoint | None:
        """The sweep's own measurement of ``c`` (not a finalist's re-measurement)."""
        return next((p for p in self.points if p.config == c and not p.final_round), None)

    def estimate_vram(self, c: TuneConfig) -> int | None:
        if self.desc is None or not self.on_gpu:
            return None
        fit = FitSettings.of(c.apply_to(self.req.base), overhead=self.overhead)
        return estimate(self.desc, fit).vram

    def free_memory(self, c: TuneConfig) -> int | None:
        """Device memory free now on the cards ``c`` uses, as the engine's devices
        report it (None on a CPU or when it cannot be read)."""
        if not self.on_gpu:
            return None
        try:
            return free_on_cards(self.engine.probe(), c.placement.tensor_split)
        except EngineError:
            return None

    def measure(self, c: TuneConfig, final_round: int = 0) -> TunePoint:
        """Load (or change threads live), measure one configuration, read free memory."""
        start = time.perf_counter()
        settings = c.apply_to(self.req.base)
        est = self.estimate_vram(c)
        margin = self.limits.margin
        loaded_free: int | None = None
        try:
            current = self.loaded if self.engine.alive and self.engine.info else None
            live = current is not None and settings == current.with_changes(
                n_threads=c.n_threads, n_threads_batch=c.n_threads_batch
            )
            self.loaded = None  # until the engine says it holds them
            if live:
                self.engine.set_threads(c.n_threads, c.n_threads_batch)
            else:
                self.engine.load(settings)
            self.loaded = settings
            loaded_free = self.free_memory(c)
            decode = self.req.final_decode_tokens if final_round else self.req.decode_tokens
            sample = self.engine.measure(self.req.prompt_tokens, decode)
            mem = self.engine.memory()
            free = self.free_memory(c)
        except EngineError as exc:
            return self._failed(c, exc, est, loaded_free, final_round, start)
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
            free_after=free,
            margin=margin,
            final_round=final_round,
        )
        if point.under_margin and free is not None:
            point = replace(
                point,
                note=f"left {free / MIB:.0f} MiB free, under the {margin / MIB:.0f} MiB margin",
            )
        if self.on_gpu and mem.vram is not None and est is not None and c.placement.uses_gpu:
            learn_overhead(self.hw, mem.vram, est, self.overhead)
        return point

    def _failed(
        self,
        c: TuneConfig,
        exc: EngineError,
        est: int | None,
        loaded_free: int | None,
        final_round: int,
        start: float,
    ) -> TunePoint:
        """An abort is not a measurement: the point does not fit, with the free memory
        last read; a fresh engine process takes over (a failed allocation can leave
        device memory held)."""
        if exc.message == "aborted" or self.should_stop():
            self.stopped = True
        if exc.kind in _OOM or not self.engine.alive:
            self.engine.close()
            with contextlib.suppress(EngineError):
                self.engine.start()
        if self.stopped:
            note = "stopped"
        elif exc.kind in _OOM and loaded_free is not None:
            note = (
                f"does not fit: it loaded with {loaded_free / MIB:.0f} MiB free, then "
                f"failed while measuring: {exc.message}"
            )
        elif exc.kind in _OOM:
            note = f"does not fit: {exc.message}"
        else:
            note = f"failed: {exc.message}"
        return TunePoint(
            c,
            False,
            estimate_vram=est,
            note=note,
            seconds=time.perf_counter() - start,
            free_after=loaded_free,
            margin=self.limits.margin,
            error_kind=exc.kind.value,
            final_round=final_round,
        )

    def run(self, c: TuneConfig, final_round: int = 0) -> TunePoint | None:
        """Measure ``c`` and keep the point (None: already measured, no time, or stopped)."""
        if (not final_round and self.seen(c)) or not self.has_time():
            return None
        point = self.measure(c, final_round)
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


def memory_limits(
    engine: MeasuredEngine, hw: HardwareInfo, margin_mib: int = GPU_MARGIN_MIB
) -> plan.MemoryLimits:
    """What a configuration may use, and the device memory it must leave free."""
    vram, ram = available(engine, hw)
    margin = plan.margin_for(vram, margin_mib)
    return plan.MemoryLimits(
        max(0, vram - margin) if vram else 0, int(ram * (1 - RAM_MARGIN)), margin
    )


def with_free_vram(hw: HardwareInfo, vram: int) -> HardwareInfo:
    """``hw`` with ``vram`` bytes free on its first GPU (for the advisor's bound)."""
    if not hw.gpus:
        return hw
    first = replace(hw.gpus[0], free=max(0, vram - sum(g.free for g in hw.gpus[1:])))
    return replace(hw, gpus=[first, *hw.gpus[1:]])
