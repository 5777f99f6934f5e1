"""Where a model's weights go: one value the settings, the estimate, the tuner and the
offload panel all pass around.

A ``Placement`` has llama.cpp's own four knobs, under their llama.cpp names (the
same names as the fields of ``LoadSettings`` and ``FitSettings``, so that
``Placement.of`` and ``Placement.onto`` are the one conversion to and from
anything that carries them). The offload panel's "expert layers on the GPU" is
the other side of ``n_cpu_moe``; ``expert_layers_on_gpu`` and
``with_expert_layers_on_gpu`` are the one place that converts between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Placed = TypeVar("Placed", bound=DataclassInstance)

PLACEMENT_FIELDS = ("n_gpu_layers", "n_cpu_moe", "override_tensors", "tensor_split")


def parse_split(text: str) -> tuple[float, ...]:
    """``"3,2"`` -> ``(3.0, 2.0)``; ``""`` -> ``()``; a bad list raises ``ValueError``."""
    if not text.strip():
        return ()
    try:
        shares = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise ValueError(
            f"tensor_split must be numbers separated by commas, got {text!r}"
        ) from None
    if any(x < 0 for x in shares) or not any(shares):
        raise ValueError(f"tensor_split needs non-negative shares, one above 0, got {text!r}")
    return shares


def parse_overrides(text: str) -> tuple[str, ...]:
    """The patterns of llama.cpp's ``-ot`` rules (``REGEX=CPU,…``); only CPU is a target."""
    out = []
    for rule in (r.strip() for r in text.strip().strip('"').split(",")):
        if not rule:
            continue
        pattern, _, target = rule.rpartition("=")
        if not pattern or target.upper() != "CPU":
            raise ValueError(f"override_tensors rules are REGEX=CPU, got {rule!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"override_tensors: {pattern!r} is not a regular expression") from exc
        out.append(pattern)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Placement:
    """GPU layers, the layers whose experts stay in RAM, ``-ot`` rules and the split."""

    n_gpu_layers: int = 0  # of n_layer + 1: llama.cpp offloads the output head first
    n_cpu_moe: int = 0  # offloaded layers (the first N) whose expert tensors stay in RAM
    override_tensors: str = ""  # llama.cpp's -ot rules: "REGEX=CPU,REGEX=CPU"
    tensor_split: str = ""  # several GPUs: shares of the offloaded layers ("": by free memory)

    def __post_init__(self) -> None:
        if self.n_cpu_moe < 0:
            raise ValueError(f"n_cpu_moe must be 0 or more, got {self.n_cpu_moe}")
        parse_split(self.tensor_split)
        parse_overrides(self.override_tensors)

    @classmethod
    def of(cls, holder: Any) -> Placement:
        """The placement that ``holder`` (load or fit settings, a tuning point) carries;
        a field it lacks keeps its default."""
        return cls(**{n: getattr(holder, n) for n in PLACEMENT_FIELDS if hasattr(holder, n)})

    def onto(self, holder: Placed) -> Placed:
        """``holder`` (a frozen dataclass) with this placement, in the fields it has."""
        names = {f.name for f in fields(holder)} & set(PLACEMENT_FIELDS)
        return replace(holder, **{n: getattr(self, n) for n in names})

    @property
    def split(self) -> tuple[float, ...]:
        """The GPUs' shares of the offloaded layers (empty: llama.cpp's default)."""
        return parse_split(self.tensor_split)

    def expert_layers_on_gpu(self, n_layer: int) -> int:
        """Of ``n_layer`` layers, those whose experts are on the GPU too (the slider's
        view of ``n_cpu_moe``)."""
        return max(0, n_layer - self.n_cpu_moe)

    def with_expert_layers_on_gpu(self, layers: int, n_layer: int) -> Placement:
        """This placement with the experts of ``layers`` of ``n_layer`` on the GPU."""
        return replace(self, n_cpu_moe=max(0, n_layer - layers))

    def with_all_layers(self, n_layer: int) -> Placement:
        """Every layer and the output head offloaded (the experts as they are)."""
        return replace(self, n_gpu_layers=n_layer + 1)

    def label(self) -> str:
        """``12 GPU layers (experts of 3 in RAM), split 1,0``."""
        text = f"{self.n_gpu_layers} GPU layers"
        if self.n_cpu_moe:
            text += f" (experts of {self.n_cpu_moe} in RAM)"
        if self.override_tensors:
            text += ", -ot rules"
        if self.tensor_split:
            text += f", split {self.tensor_split}"
        return text
