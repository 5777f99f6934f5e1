"""Where a model's weights go: one frozen value that the load settings, the fit
settings, a fit and the tuner's points each carry, nested (``settings.load.placement``).

A ``Placement`` has llama.cpp's own four knobs, under their llama.cpp names. The
offload panel's "expert layers on the GPU" is the other side of ``n_cpu_moe``;
``expert_layers_on_gpu`` and ``with_expert_layers_on_gpu`` are the one place that
converts between them. ``all_layers`` and ``layers_on_gpu`` are the one place that
knows how llama.cpp counts "all layers" (the output head is one more, -1 means all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

PLACEMENT_FIELDS = ("n_gpu_layers", "n_cpu_moe", "override_tensors", "tensor_split")


def all_layers(n_layer: int) -> int:
    """The n_gpu_layers that offloads everything: the ``n_layer`` repeating layers
    and the output head, which llama.cpp counts as one more layer (offloaded first)."""
    return n_layer + 1


def layers_on_gpu(n_gpu_layers: int, n_layer: int) -> int:
    """How many of the ``all_layers(n_layer)`` llama.cpp offloads for ``n_gpu_layers``
    (a negative value, or one past the top, means all of them)."""
    top = all_layers(n_layer)
    return top if n_gpu_layers < 0 else min(n_gpu_layers, top)


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


@dataclass(frozen=True, kw_only=True, order=True)
class Placement:
    """GPU layers, the layers whose experts stay in RAM, ``-ot`` rules and the split.

    The fields' help is what the terminal's options and the settings show."""

    # Of all_layers(n_layer); -1: all. llama.cpp offloads the output head first.
    n_gpu_layers: int = field(default=0, metadata={"help": "layers to offload to the GPU"})
    n_cpu_moe: int = field(
        default=0,
        metadata={
            "help": "mixture-of-experts models: keep the experts of the first N layers in RAM "
            "(attention stays on the GPU)"
        },
    )
    override_tensors: str = field(
        default="",
        metadata={
            "help": "llama.cpp's -ot rules that keep matching tensors in RAM, "
            "'REGEX=CPU,REGEX=CPU' (what llama-fit-params prints)"
        },
    )
    tensor_split: str = field(
        default="",
        metadata={
            "help": "several GPUs: share of the offloaded layers per GPU, e.g. '1,0' (one GPU) "
            "or '3,2' ('': llama.cpp's split by free memory)"
        },
    )

    def __post_init__(self) -> None:
        if self.n_cpu_moe < 0:
            raise ValueError(f"n_cpu_moe must be 0 or more, got {self.n_cpu_moe}")
        parse_split(self.tensor_split)
        parse_overrides(self.override_tensors)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Placement:
        """A placement from its JSON object (keys it does not know are left out)."""
        return cls(**{k: v for k, v in data.items() if k in PLACEMENT_FIELDS})

    def gpu_layers(self, n_layer: int) -> int:
        """The layers (the output head among them) offloaded of a model of ``n_layer``."""
        return layers_on_gpu(self.n_gpu_layers, n_layer)

    @property
    def uses_gpu(self) -> bool:
        """Any layer (or the output head) offloaded."""
        return self.n_gpu_layers != 0

    def all_on_gpu(self, n_layer: int) -> bool:
        """Every layer and the output head offloaded (experts in RAM or not)."""
        return self.gpu_layers(n_layer) == all_layers(n_layer)

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
        return replace(self, n_gpu_layers=all_layers(n_layer))

    def label(self) -> str:
        """``12 GPU layers (experts of 3 on the CPU), split 1,0``."""
        text = f"{self.n_gpu_layers} GPU layers" if self.n_gpu_layers >= 0 else "all GPU layers"
        if self.n_cpu_moe:
            text += f" (experts of {self.n_cpu_moe} on the CPU)"
        if self.override_tensors:
            text += ", -ot rules"
        if self.tensor_split:
            text += f", split {self.tensor_split}"
        return text
