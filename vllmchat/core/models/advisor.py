"""Does it fit? The most GPU layers, the largest context, and which quant to take.

The rule, from practice: take the 8-bit quant when it fits fully on the GPU,
drop to 4/5/6-bit when short; a model split between GPU and CPU decodes at
the speed of its CPU part, so a smaller quant fully on the GPU beats a larger
one partly offloaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.models.memory_estimate import MemoryEstimate
from vllmchat.core.models.projector import ProjectorInfo
from vllmchat.core.placement import Placement, all_layers

VRAM_MARGIN = 0.92  # keep 8% of free VRAM for the driver and the desktop
RAM_MARGIN = 0.90
RAM_RESERVE = 512 * MIB

# Bits per weight, roughly; also the quality order.
QUANT_BITS = {
    "F32": 32,
    "F16": 16,
    "BF16": 16,
    "Q8_0": 8.5,
    "Q6_K": 6.6,
    "Q5_K_M": 5.7,
    "Q5_K_S": 5.5,
    "Q5_0": 5.5,
    "Q5_1": 6.0,
    "Q4_K_M": 4.85,
    "Q4_K_S": 4.6,
    "Q4_1": 5.0,
    "Q4_0": 4.5,
    "IQ4_NL": 4.5,
    "IQ4_XS": 4.3,
    "Q3_K_L": 4.3,
    "Q3_K_M": 3.9,
    "Q3_K_S": 3.5,
    "IQ3_M": 3.7,
    "IQ3_S": 3.4,
    "IQ3_XS": 3.3,
    "IQ3_XXS": 3.1,
    "Q2_K": 3.35,
    "Q2_K_S": 3.0,
    "IQ2_M": 2.7,
    "IQ2_S": 2.5,
    "IQ2_XS": 2.3,
    "IQ2_XXS": 2.1,
    "IQ1_M": 1.75,
    "IQ1_S": 1.6,
    "TQ1_0": 1.7,
    "TQ2_0": 2.1,
    "MXFP4": 4.25,
}
_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])("
    + "|".join(sorted(map(re.escape, QUANT_BITS), key=len, reverse=True))
    + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)

GPU_FULL, GPU_PARTIAL, RAM_ONLY, NO_FIT = "gpu_full", "gpu_partial", "ram_only", "no_fit"


def quant_label(filename: str) -> str:
    """The quant label in a GGUF file name (``Q4_K_M``), or ``""``."""
    matches = _QUANT_RE.findall(filename.replace("-", "_").replace(".", "_"))
    return matches[-1].upper() if matches else ""


def display_name(filename: str) -> str:
    """A model's name as its file tells it: no folder, ``.gguf``, split part or quant label."""
    stem = os.path.basename(filename).removesuffix(".gguf")
    stem = re.sub(r"-\d{5}-of-\d{5}$", "", stem)
    label = quant_label(stem)
    if label and stem.upper().endswith(label):
        stem = stem[: -len(label)].rstrip(".-_")
    return stem or os.path.basename(filename)


@dataclass(frozen=True)
class Fit:
    """How a model fits: the kind, the placement it was estimated at (GPU layers as
    offloaded, experts in RAM, the split taken), the estimate, and words for it."""

    kind: str
    placement: Placement
    estimate: MemoryEstimate
    message: str

    @property
    def gpu_layers(self) -> int:
        """The layers offloaded, the output head among them."""
        return self.placement.n_gpu_layers

    @property
    def fits(self) -> bool:
        return self.kind != NO_FIT

    @property
    def short(self) -> str:
        """A badge's words: "fully on GPU", "fits: experts of 20 layers on the CPU", …"""
        if self.kind == GPU_PARTIAL and self.placement.n_cpu_moe:
            return f"fits: experts of {self.placement.n_cpu_moe} layers on the CPU"
        return {
            GPU_FULL: "fully on GPU",
            GPU_PARTIAL: f"{self.gpu_layers} layers on GPU",
            RAM_ONLY: "RAM only",
        }.get(self.kind, "does not fit")


def _budget(hw: HardwareInfo) -> tuple[int, int]:
    """The GPU's and the RAM's budget; on one pool (``hw.unified``) the GPU's is the
    smaller of its working-set limit and the RAM's, and both draw on the RAM's."""
    ram = max(0, int(hw.ram_available * RAM_MARGIN) - RAM_RESERVE)
    vram = int(hw.vram_free * VRAM_MARGIN) if hw.gpu_offload else 0
    return (min(vram, ram) if hw.unified else vram), ram


def _ok(e: MemoryEstimate, hw: HardwareInfo, s: FitSettings) -> bool:
    # Mapped weights live in the page cache: they can be paged, but a model
    # larger than RAM pages from disk on every token, so count them.
    vram, ram = _budget(hw)
    if e.ram > ram or e.vram > vram:
        return False
    if hw.unified and e.vram + e.ram > ram:  # one pool: the GPU's part is RAM too
        return False
    if len(hw.gpus) > 1 and hw.gpu_offload:  # each GPU holds its own part
        per = e.vram_by_device
        return all(used <= g.free * VRAM_MARGIN for used, g in zip(per, hw.gpus, strict=False))
    return True


def on_devices(s: FitSettings, hw: HardwareInfo) -> FitSettings:
    """``s`` with the GPUs' free memory, which llama.cpp's default split follows."""
    if len(hw.gpus) > 1:
        return replace(s, gpu_free=tuple(g.free for g in hw.gpus))
    return replace(s, gpu_free=())


def _fits(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> bool:
    return _ok(estimate(desc, replace(on_devices(s, hw), gpu=True)), hw, s)


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest value in ``lo..hi`` for which ``ok`` holds (monotone), or None."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def max_gpu_layers(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> int:
    """The most layers (``all_layers(n_layer)``, output included) that fit in free VRAM."""
    if not hw.gpu_offload:
        return 0
    top = all_layers(desc.n_layer)
    best = _largest(0, top, lambda n: _fits(desc, hw, s.placed(n_gpu_layers=n)))
    return best or 0


def max_gpu_expert_layers(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> int | None:
    """With every layer offloaded, the most layers whose experts fit on the GPU too
    (``n_layer - n_cpu_moe``); None when even all experts in RAM do not fit."""
    if not (hw.gpu_offload and desc.is_moe):
        return None
    full = s.with_placement(s.placement.with_all_layers(desc.n_layer))
    return _largest(0, desc.n_layer, lambda g: _fits(desc, hw, _experts_on_gpu(full, g, desc)))


def _experts_on_gpu(s: FitSettings, layers: int, desc: ModelDescription) -> FitSettings:
    return s.with_placement(s.placement.with_expert_layers_on_gpu(layers, desc.n_layer))


def best_placement(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> FitSettings:
    """The placement to start from: everything on one GPU when it fits; for a mixture
    of experts every layer's attention on the GPU and the experts of as few layers
    as needed in RAM; else the most whole layers; several GPUs share the model only
    when one is not enough (by their free memory)."""
    if len(hw.gpus) > 1 and hw.gpu_offload and not s.placement.tensor_split:
        alone = s.placed(tensor_split=",".join(["1"] + ["0"] * (len(hw.gpus) - 1)))
        one = _placement(desc, hw, alone)
        if one.placement.all_on_gpu(desc.n_layer) and one.placement.n_cpu_moe == 0:
            return one
        return _placement(desc, hw, s)
    return _placement(desc, hw, s)


def _placement(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> FitSettings:
    full = s.placed(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=0)
    if not hw.gpu_offload:
        return s.placed(n_gpu_layers=0, n_cpu_moe=0)
    if _fits(desc, hw, full):
        return full
    g = max_gpu_expert_layers(desc, hw, s)
    if g is not None:
        return _experts_on_gpu(full, g, desc)
    layers_only = s.placed(n_cpu_moe=desc.n_layer if desc.is_moe else 0)
    return layers_only.placed(n_gpu_layers=max_gpu_layers(desc, hw, layers_only))


def check_fit(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> Fit:
    """Whether these exact settings fit."""
    vram, ram = _budget(hw)
    s = on_devices(s, hw)
    e = estimate(desc, replace(s, gpu=hw.gpu_offload))
    need = f"needs {e.vram / MIB:,.0f} MiB VRAM + {e.ram / MIB:,.0f} MiB RAM"
    if len(e.vram_by_device) > 1:
        parts = " + ".join(f"{b / MIB:,.0f}" for b in e.vram_by_device)
        need = f"needs {parts} MiB on the GPUs + {e.ram / MIB:,.0f} MiB RAM"
    if e.draft_gpu or e.draft_cpu:
        need += f" (the draft model's {(e.draft_gpu + e.draft_cpu) / MIB:,.0f} MiB included)"
    experts = f", experts of {e.cpu_moe_layers} layers on the CPU" if e.cpu_moe_layers else ""
    if hw.unified:
        need = f"needs {(e.vram + e.ram) / MIB:,.0f} MiB of the one memory pool (GPU "
        need += f"{e.vram / MIB:,.0f} + CPU {e.ram / MIB:,.0f})"
    if not _ok(e, hw, s):
        kind = NO_FIT
        free = f"{vram / MIB:,.0f} MiB VRAM + {ram / MIB:,.0f} MiB RAM free"
        if hw.unified:
            free = f"{ram / MIB:,.0f} MiB free, of which the GPU may use {vram / MIB:,.0f}"
        message = f"Does not fit: {need}, {free}."
    elif e.gpu_layers == 0:
        in_ram = f"needs {e.ram / MIB:,.0f} MiB RAM" if e.vram == 0 and not hw.unified else need
        kind, message = RAM_ONLY, f"Runs from RAM only: {in_ram}."
    elif e.gpu_layers > desc.n_layer and not e.cpu_moe_layers:
        kind, message = GPU_FULL, f"Fits fully on the GPU: {need}."
    elif e.gpu_layers > desc.n_layer:
        kind = GPU_PARTIAL
        message = f"Fits: all {all_layers(desc.n_layer)} layers on the GPU{experts}; {need}."
    else:
        kind = GPU_PARTIAL
        top = all_layers(desc.n_layer)
        message = f"{e.gpu_layers} of {top} layers on the GPU{experts}: {need}."
    taken = replace(s.placement, n_gpu_layers=e.gpu_layers, n_cpu_moe=e.cpu_moe_layers)
    return Fit(kind, taken, e, message)


def best_fit(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> Fit:
    """The fit of the best placement (the settings' n_gpu_layers and n_cpu_moe ignored):
    experts in RAM for a mixture of experts, else the most GPU layers that fit."""
    return check_fit(desc, hw, best_placement(desc, hw, s))


def max_context(desc: ModelDescription, hw: HardwareInfo, s: FitSettings) -> int:
    """The largest context (a multiple of 256, up to the trained one) that fits; 0 if none."""
    top = max(256, desc.n_ctx_train or 131072) // 256
    lo, hi = 0, top
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if check_fit(desc, hw, replace(s, n_ctx=mid * 256)).fits:
            lo = mid
        else:
            hi = mid - 1
    return lo * 256


def scaled(desc: ModelDescription, file_bytes: int) -> ModelDescription:
    """The same model at another quant: weights scaled to the file size."""
    f = file_bytes / max(1, desc.weights_bytes)
    return replace(
        desc,
        layer_bytes=[int(b * f) for b in desc.layer_bytes],
        expert_bytes=[int(b * f) for b in desc.expert_bytes],
        layer_repack_bytes=[0] * desc.n_layer,
        input_bytes=int(desc.input_bytes * f),
        output_bytes=int(desc.output_bytes * f),
        output_repack_bytes=0,
        tensors=[
            replace(t, offset=int(t.offset * f), n_bytes=int(t.n_bytes * f), repack=False)
            for t in desc.tensors
        ],
    )


@dataclass(frozen=True)
class QuantAdvice:
    """One quant of a model: its label, size, fit, and whether it is the one to take."""

    filename: str
    label: str
    size: int
    fit: Fit
    recommended: bool = False
    kld: float | None = None  # measured mean KLD against the best installed quant


KLD_HOLDS = 0.05  # a quant whose measured mean KLD is at most this keeps the quality


def advise(
    quants: list[tuple[str, int, ModelDescription]],
    hw: HardwareInfo,
    s: FitSettings,
    quality: Mapping[str, float] | None = None,
    projectors: Mapping[str, ProjectorInfo] | None = None,
) -> list[QuantAdvice]:
    """Fit of each (filename, size, description) and the recommended one marked;
    ``quality`` (filename -> measured mean KLD) makes the choice a measured one;
    ``projectors`` (filename -> the projector downloaded with it) adds each one's."""
    quality, projectors = quality or {}, projectors or {}
    rows = []
    for filename, size, desc in quants:
        fit = best_fit(desc, hw, s.with_projector(projectors.get(filename)))
        rows.append(
            QuantAdvice(filename, quant_label(filename), size, fit, kld=quality.get(filename))
        )
    pick = _recommend_measured(rows)
    if pick is None:
        pick = _recommend(rows)
    return [replace(r, recommended=(i == pick)) for i, r in enumerate(rows)]


def _recommend_measured(rows: list[QuantAdvice]) -> int | None:
    """From high precision down, the lowest quant whose measured quality still holds
    (fully on the GPU when one is)."""
    holds = [
        i for i, r in enumerate(rows) if r.fit.fits and r.kld is not None and r.kld <= KLD_HOLDS
    ]
    if not holds:
        return None
    full = [i for i in holds if rows[i].fit.kind == GPU_FULL]
    pool = full or holds
    return min(pool, key=lambda i: (QUANT_BITS.get(rows[i].label, 99.0), rows[i].size))


def _recommend(rows: list[QuantAdvice]) -> int | None:
    def bits(r: QuantAdvice) -> float:
        return QUANT_BITS.get(r.label, 99.0)

    usable = [i for i, r in enumerate(rows) if r.fit.fits and bits(r) <= 8.5]
    if not usable:
        usable = [i for i, r in enumerate(rows) if r.fit.fits]
    if not usable:
        return None
    full = [i for i in usable if rows[i].fit.kind == GPU_FULL]
    if full:  # the best quality that sits fully on the GPU
        return max(full, key=lambda i: bits(rows[i]))
    # Split or CPU: decoding is bandwidth-bound; a 4-bit K-quant is the sweet spot.
    four = [i for i in usable if 4.3 <= bits(rows[i]) <= 5.0]
    pool = four or usable
    return max(pool, key=lambda i: (rows[i].fit.gpu_layers, bits(rows[i])))
