"""What a tuning sweep measures, as frozen values that serialize to JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class TuneConfig:
    """One point of the search space."""

    n_gpu_layers: int
    n_threads: int
    n_threads_batch: int
    n_ubatch: int

    def label(self) -> str:
        return (
            f"{self.n_gpu_layers} layers, {self.n_threads}/{self.n_threads_batch} threads, "
            f"ubatch {self.n_ubatch}"
        )


@dataclass(frozen=True)
class TunePoint:
    """A configuration and what it measured (or why it could not be measured)."""

    config: TuneConfig
    fits: bool
    prefill_tok_s: float = 0.0
    decode_tok_s: float = 0.0
    vram: int | None = None  # device memory of the engine process (bytes)
    vram_buffers: int = 0  # llama.cpp's device buffer sums (bytes)
    ram: int = 0  # RSS of the engine process (bytes)
    estimate_vram: int | None = None  # the estimator's figure for this point (bytes)
    note: str = ""  # why it does not fit / what went wrong
    seconds: float = 0.0

    @property
    def estimate_error(self) -> float | None:
        """(estimate - measured) / measured device memory."""
        if self.vram is None or self.estimate_vram is None or self.vram <= 0:
            return None
        return (self.estimate_vram - self.vram) / self.vram


@dataclass(frozen=True)
class TuneResult:
    """A finished (or stopped) sweep and its pick."""

    points: tuple[TunePoint, ...]
    pick: TuneConfig | None
    reason: str  # why this pick
    seconds: float
    stopped: bool = False
    budget_s: float = 0.0
    memory_limit: int = 0  # bytes a configuration may use on its main device
    device: str = "CPU"
    meta: dict[str, Any] = field(default_factory=dict)

    def pick_point(self) -> TunePoint | None:
        """The measured point of the pick (fastest decode among its measurements)."""
        same = [p for p in self.points if p.fits and p.config == self.pick]
        return max(same, key=lambda p: p.decode_tok_s, default=None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneResult:
        points = tuple(
            TunePoint(**{**p, "config": TuneConfig(**p["config"])}) for p in data["points"]
        )
        pick = TuneConfig(**data["pick"]) if data.get("pick") else None
        rest = {k: v for k, v in data.items() if k not in ("points", "pick")}
        return cls(points=points, pick=pick, **rest)


@dataclass(frozen=True)
class TuneStarted:
    planned: int  # points planned so far (refinement may add more)
    budget_s: float
    device: str


@dataclass(frozen=True)
class PointMeasured:
    point: TunePoint
    done: int
    planned: int
    elapsed_s: float
    eta_s: float  # time left, from the mean time per point (capped by the budget)


@dataclass(frozen=True)
class TuneFinished:
    result: TuneResult


TuneEvent = TuneStarted | PointMeasured | TuneFinished
