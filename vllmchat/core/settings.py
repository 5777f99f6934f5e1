"""Load and sampling settings, keyword-only and immutable."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from vllmchat.core.placement import PLACEMENT_FIELDS, Placement
from vllmchat.core.placement import parse_overrides as parse_overrides  # re-exported
from vllmchat.core.placement import parse_split as parse_split

KvType = Literal["f16", "q8_0", "q4_0"]
SpeculationMode = Literal["off", "auto", "always"]
KV_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")

# Device memory the tuner keeps free: this many MiB or 3% of what the model may use,
# whichever is larger (measured: at about 86 MiB free, llama.cpp aborted in the first
# decode). The default of ``AppSettings.gpu_margin_mib``.
GPU_MARGIN_MIB = 256
# API sequences beside the window's, each a whole n_ctx of KV cache (llama.cpp takes 256
# sequences a context; 64 in all keeps the largest cache a user can ask for sane).
MAX_API_SLOTS = 63

# ggml_type ids used by llama.cpp for the KV cache.
GGML_TYPE_IDS: dict[str, int] = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity), or fewer where ``VLLMCHAT_CPUS``
    says so: a machine or container shared with other work."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    wanted = os.environ.get("VLLMCHAT_CPUS", "").strip()
    return max(1, min(cores, int(wanted))) if wanted.isdigit() and int(wanted) > 0 else cores


def within_cores(threads: int) -> int:
    """``threads`` capped at the usable cores: more would spin against each other at
    every one of llama.cpp's barriers (a step then waits for the scheduler)."""
    return max(1, min(threads, usable_cores()))


def default_threads() -> int:
    """Physical-ish core count: llama.cpp is slower with hyperthreads oversubscribed."""
    n = usable_cores()
    return max(1, n if n <= 4 else n // 2)


@dataclass(frozen=True, kw_only=True)
class LoadSettings:
    """How to load a GGUF. Changing any field needs a reload."""

    model_path: str = field(metadata={"help": "path of a .gguf file (default: the demo model)"})
    placement: Placement = field(
        default_factory=Placement,
        metadata={"help": "where the weights go: GPU layers, experts in RAM, -ot rules, split"},
    )
    n_ctx: int = field(default=4096, metadata={"help": "context size in tokens"})
    n_threads: int = field(default_factory=default_threads, metadata={"help": "CPU threads"})
    n_threads_batch: int = field(
        default=0, metadata={"help": "CPU threads for prompt processing (0: as --threads)"}
    )
    n_batch: int = field(default=512, metadata={"help": "prompt tokens evaluated per call"})
    n_ubatch: int = field(default=512, metadata={"help": "prompt tokens per compute step"})
    flash_attn: bool = field(
        default=False, metadata={"help": "flash attention (needed for a quantized V cache)"}
    )
    type_k: KvType = field(default="f16", metadata={"help": "KV cache type of K"})
    type_v: KvType = field(default="f16", metadata={"help": "KV cache type of V"})
    use_mmap: bool = field(
        default=True, metadata={"help": "map the model file instead of reading it"}
    )
    draft_model: str = field(
        default="", metadata={"help": "a small GGUF of the same vocabulary that drafts tokens"}
    )
    draft_n_gpu_layers: int = field(
        default=0, metadata={"help": "the draft model's layers on the GPU"}
    )
    mmproj_path: str = field(
        default="",
        metadata={
            "help": "a multimodal projector GGUF (mmproj) made for this model: it then takes images"
        },
    )
    # Full-size sliding-window cache (models such as Gemma 3). Off, the cache of
    # sliding-window layers holds only the window: less memory, faster long
    # chats, but rolling back further than the window re-prefills.
    swa_full: bool = field(
        default=False, metadata={"help": "full-size sliding-window cache (Gemma 3 and others)"}
    )

    api_slots: int = field(
        default=0,
        metadata={
            "help": "API clients answered at once, each in its own sequence of n_ctx tokens "
            "beside the window's (the KV cache's memory grows by as many times)"
        },
    )

    @property
    def n_seq(self) -> int:
        """Sequences the context holds: the window's, then one per API slot."""
        return 1 + self.api_slots

    def __post_init__(self) -> None:
        if not 0 <= self.api_slots <= MAX_API_SLOTS:
            raise ValueError(f"api_slots must be from 0 to {MAX_API_SLOTS}, got {self.api_slots}")
        if self.n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16, got {self.n_ctx}")
        if self.n_threads < 1 or self.n_threads_batch < 0:
            raise ValueError("n_threads must be positive (n_threads_batch 0 means the same)")
        if self.n_batch < 1 or self.n_ubatch < 1:
            raise ValueError("n_batch and n_ubatch must be positive")
        for name in ("type_k", "type_v"):
            if getattr(self, name) not in KV_TYPES:
                raise ValueError(f"{name} must be one of {KV_TYPES}")
        if self.type_v != "f16" and not self.flash_attn:
            raise ValueError("a quantized V cache needs flash attention (flash_attn=True)")

    def with_placement(self, placement: Placement) -> LoadSettings:
        """These settings with the weights placed anew."""
        return replace(self, placement=placement)

    @property
    def threads_batch(self) -> int:
        """Threads for prompt processing (``n_threads_batch``, or ``n_threads`` when 0)."""
        return self.n_threads_batch or self.n_threads

    def with_changes(self, **changes: Any) -> LoadSettings:
        """A copy with some fields changed; the placement's own fields are given by their
        names too (``with_changes(n_gpu_layers=8)``)."""
        placed = {name: changes.pop(name) for name in PLACEMENT_FIELDS if name in changes}
        if placed:
            changes["placement"] = replace(changes.get("placement", self.placement), **placed)
        return replace(self, **changes)

    def on_usable_cores(self) -> LoadSettings:
        """These settings with no more CPU threads than the usable cores."""
        cores = usable_cores()
        if self.n_threads <= cores and self.n_threads_batch <= cores:
            return self
        return replace(
            self,
            n_threads=within_cores(self.n_threads),
            n_threads_batch=min(self.n_threads_batch, cores),
        )

    def flat(self) -> dict[str, Any]:
        """Every field by name, the placement's among them (what ``with_changes`` takes)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "placement"}
        return {**out, **asdict(self.placement)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def state_binding(self) -> dict[str, Any]:
        """The settings a saved KV state depends on (not n_gpu_layers or threads)."""
        return {
            "type_k": self.type_k,
            "type_v": self.type_v,
            "flash_attn": self.flash_attn,
            "swa_full": self.swa_full,
        }


@dataclass(frozen=True, kw_only=True)
class SamplingSettings:
    """How to pick tokens. Changing these never needs a reload."""

    temperature: float = field(default=0.7, metadata={"help": "sampling temperature (0: greedy)"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling"})
    top_k: int = field(default=40, metadata={"help": "keep the k most likely tokens"})
    min_p: float = field(
        default=0.05, metadata={"help": "drop tokens below this share of the best"}
    )
    repeat_penalty: float = field(default=1.1, metadata={"help": "penalty on repeated tokens"})
    max_tokens: int = field(default=512, metadata={"help": "most tokens in a reply"})
    seed: int = field(default=-1, metadata={"help": "sampling seed (-1: random)"})
    thinking: bool = field(
        default=True,
        metadata={
            "help": "let a reasoning model think first (where its template can turn "
            "thinking off: enable_thinking)"
        },
    )
    speculation: SpeculationMode = field(
        default="auto",
        metadata={
            "help": "speculative decoding: guesses checked in one batch, same output "
            "(auto: only while it pays)"
        },
    )
    draft_max: int = field(default=8, metadata={"help": "most tokens drafted per step"})
    # Benchmarks decode a fixed number of tokens.
    ignore_eos: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
