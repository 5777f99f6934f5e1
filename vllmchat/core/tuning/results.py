"""What a tuning sweep and the quant lab measure, as frozen values that serialize to JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vllmchat.core.placement import Placement
from vllmchat.core.settings import LoadSettings


@dataclass(frozen=True, order=True)
class TuneConfig:
    """One point of the search space: a placement, threads and the ubatch."""

    placement: Placement
    n_threads: int
    n_threads_batch: int
    n_ubatch: int

    @property
    def gpu_rank(self) -> tuple[int, int]:
        """Orders placements by how much sits on the GPU (larger: more)."""
        return (self.placement.n_gpu_layers, -self.placement.n_cpu_moe)

    def placed(self, **changes: Any) -> TuneConfig:
        """This configuration with some of the placement's fields changed."""
        return replace(self, placement=replace(self.placement, **changes))

    def placement_label(self) -> str:
        return self.placement.label()

    def label(self) -> str:
        return (
            f"{self.placement_label()}, {self.n_threads}/{self.n_threads_batch} threads, "
            f"ubatch {self.n_ubatch}"
        )

    @classmethod
    def of(cls, s: LoadSettings) -> TuneConfig:
        """The configuration ``s`` loads."""
        return cls(s.placement, s.n_threads, s.threads_batch, s.n_ubatch)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneConfig:
        """A configuration from JSON: the placement nested, or (files written before it
        was) its fields flat beside the threads."""
        nested = data.get("placement")
        placement = Placement.from_json(nested if isinstance(nested, dict) else data)
        return cls(placement, data["n_threads"], data["n_threads_batch"], data["n_ubatch"])

    def apply_to(self, base: LoadSettings) -> LoadSettings:
        """``base`` with this configuration (the one way a pick becomes settings)."""
        return base.with_changes(
            placement=self.placement,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads_batch,
            n_ubatch=self.n_ubatch,
            n_batch=max(base.n_batch, self.n_ubatch),
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
    # Device memory left free on the cards it uses after the load and the measurement
    # (bytes; where the engine died, after the load); None without a GPU reading.
    free_after: int | None = None
    margin: int = 0  # the device memory the tuner kept free (bytes), as the rule stood
    error_kind: str = ""  # the ErrorKind of a failure ("" when it ran)
    final_round: int = 0  # k >= 1: the k-th interleaved re-measurement of a finalist

    @property
    def under_margin(self) -> bool:
        """It ran, but left less device memory free than the margin (never picked)."""
        return (
            self.fits
            and self.config.placement.uses_gpu
            and self.free_after is not None
            and self.free_after < self.margin
        )

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
    margin: int = 0  # device memory kept free (bytes): no pick leaves less

    def pick_point(self) -> TunePoint | None:
        """The measured point of the pick (fastest decode among its measurements)."""
        same = [p for p in self.points if p.fits and p.config == self.pick]
        return max(same, key=lambda p: p.decode_tok_s, default=None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneResult:
        points = tuple(
            TunePoint(**{**p, "config": TuneConfig.from_json(p["config"])}) for p in data["points"]
        )
        pick = TuneConfig.from_json(data["pick"]) if data.get("pick") else None
        rest = {k: v for k, v in data.items() if k not in ("points", "pick")}
        return cls(points=points, pick=pick, **rest)


@dataclass(frozen=True)
class QuantRow:
    """One quant's figures (speed fields 0 when speed was not measured)."""

    path: str
    label: str
    size: int
    reference: bool
    perplexity: float
    kld_mean: float
    kld_p99: float
    top1_agreement: float
    prefill_tok_s: float = 0.0
    decode_tok_s: float = 0.0
    ram: int = 0
    vram: int | None = None
    tokens_scored: int = 0
    error: str = ""
