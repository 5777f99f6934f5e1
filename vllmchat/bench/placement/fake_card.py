"""A GPU this machine does not have, for the tuner's search: an engine whose device
memory follows the estimate of what it loads (less what the test says the estimate
over-counts), that grows llama.cpp's compute pool at the first decode after a load
and aborts when the card cannot give it, and whose probe reports the card's free
memory. Speeds come from a function of the configuration (and how often it ran).

Everything else is real: the tuner, its plan, the estimate and a description
read from a real GGUF header (its tensors scaled to real sizes). The tuner's
tests and ``bench tune-noise`` use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.info import ProcessMemory, SpeedSample
from vllmchat.core.engine.protocol import LOCAL
from vllmchat.core.models.description import ModelDescription, describe
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
from vllmchat.core.models.memory import GPU_RUNTIME_OVERHEAD, MIB, FitSettings, estimate
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning.results import TuneConfig

GIB = 1 << 30
_names = itertools.count()


def scaled_moe(folder: Path, *, n_layer: int = 16, expert_mib: int = 512) -> ModelDescription:
    """A real qwen3moe GGUF header of ``n_layer`` layers with kilobyte tensors, its
    experts scaled to ``expert_mib`` per layer and every other tensor to 8 MiB."""
    from vllmchat.bench.synthetic.synth_moe import MoeShape, write_moe_gguf
    from vllmchat.core.gguf_header import read_header

    path = write_moe_gguf(folder / "scaled.gguf", MoeShape(64, n_layer, 4, 2, 16, 8, 2, 32))
    desc = describe(read_header(path))
    total = expert_mib * MIB
    tensors = []
    for t in desc.tensors:
        if not t.expert:
            tensors.append(replace(t, n_bytes=8 * MIB))
            continue
        siblings = [u for u in desc.tensors if u.expert and u.layer == t.layer]
        share = total // len(siblings)  # the last takes the rest: exactly expert_mib a layer
        last = siblings[-1] is t
        tensors.append(replace(t, n_bytes=total - share * (len(siblings) - 1) if last else share))
    return replace(desc, tensors=tensors)


Speed = Callable[[TuneConfig, int], float]  # (configuration, earlier runs of it) -> tok/s


class FakeGpuEngine:
    """The parts of ``MeasuredEngine`` the tuner uses, on a card of ``free`` bytes
    free for this engine (others hold the rest)."""

    capabilities = LOCAL

    def __init__(
        self,
        desc: ModelDescription,
        *,
        free: int,
        speed: Speed,
        over_estimate: int = 0,
        pool: int = 64 * MIB,
        context: int = 300 * MIB,
    ) -> None:
        self.desc, self.speed = desc, speed
        self.over_estimate, self.pool, self.context = over_estimate, pool, context
        self.card_total = 141 * GIB
        self.others = self.card_total - free
        self.name = f"Fake GPU {next(_names)}"  # its own learned overhead
        self.settings: LoadSettings | None = None
        self.info: Any = None
        self.used = 0
        self._alive = False
        self._pool_grown = False
        self.runs: dict[TuneConfig, int] = {}
        self.log: list[tuple[str, TuneConfig | None]] = []

    # -- the card ------------------------------------------------------------------------
    def free(self) -> int:
        return self.card_total - self.others - self.used

    def needs(self, s: LoadSettings) -> int:
        """Device memory a load of ``s`` really takes (the estimate, less what it
        over-counts)."""
        fit = FitSettings.of(s, overhead=GPU_RUNTIME_OVERHEAD)
        return estimate(self.desc, fit).vram - self.over_estimate

    # -- the engine ----------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def pid(self) -> int | None:
        return None

    def start(self) -> None:
        if not self._alive:
            self._alive, self.used = True, self.context

    def close(self) -> None:
        self._alive, self.used, self.settings, self.info = False, 0, None, None

    def stop(self) -> None:
        pass

    def probe(self) -> HardwareInfo:
        gpu = GpuInfo(self.name, self.card_total, self.free())
        return HardwareInfo(64 * GIB, 48 * GIB, [gpu], True)

    def memory(self) -> ProcessMemory:
        if not self._alive:
            raise EngineError(ErrorKind.ENGINE_DIED, "The engine is not running.")
        return ProcessMemory(rss=2 * GIB, vram_process=self.used)

    def load(self, settings: LoadSettings) -> Any:
        self.start()
        self.settings, self.info, self.used = settings, None, self.context
        need = self.needs(settings)
        self.log.append(("load", TuneConfig.of(settings)))
        if need > self.free() + self.context:
            raise EngineError(ErrorKind.OOM_LOAD, "Not enough device memory for the model.")
        self.used, self.info, self._pool_grown = need, object(), False
        return self.info

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        assert self.settings is not None
        self.settings = self.settings.with_changes(
            n_threads=n_threads, n_threads_batch=n_threads_batch
        )

    def measure(self, prompt_tokens: int = 512, decode_tokens: int = 64) -> SpeedSample:
        if not self._alive or self.settings is None or self.info is None:
            raise EngineError(ErrorKind.NO_MODEL, "No model is loaded.")
        c = TuneConfig.of(self.settings)
        self.log.append(("measure", c))
        if not self._pool_grown:  # llama.cpp's compute pool grows at the first decode
            if self.free() < self.pool:
                self.close()
                raise EngineError(
                    ErrorKind.ENGINE_DIED,
                    "The engine process ended: it aborted (llama.cpp assertion or out of memory).",
                )
            self.used += self.pool
            self._pool_grown = True
        n = self.runs.get(c, 0)
        self.runs[c] = n + 1
        tok_s = self.speed(c, n)
        return SpeedSample(
            prompt_tokens,
            prompt_tokens / (20 * tok_s),
            decode_tokens,
            decode_tokens / tok_s,
            c.n_threads,
            c.n_threads_batch,
        )

    def measured_configs(self) -> list[TuneConfig]:
        """The configurations measured, in order."""
        return [c for what, c in self.log if what == "measure" and c is not None]
