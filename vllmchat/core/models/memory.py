"""Estimate the memory llama.cpp will allocate for a model and settings.

Weights split by layer between GPU and CPU (llama.cpp offloads the last
``n_gpu_layers`` layers; the output head goes to the GPU only past the last
layer), the KV cache per layer as llama.cpp sizes it (context padded to 256,
sliding-window layers sized to the window plus a ubatch), compute buffers
from the worst-case graph (the logits of a full ubatch, or the attention
scores without flash attention), and the GPU runtime's own overhead.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllmchat.core.models.description import ModelDescription

MIB = 1 << 20
GPU_RUNTIME_OVERHEAD = 350 * MIB  # CUDA context, cuBLAS workspace
KV_TYPE_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "f32": 4.0}


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """The load settings that decide memory."""

    n_gpu_layers: int = 0
    n_ctx: int = 4096
    n_ubatch: int = 512
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: bool = False
    swa_full: bool = False
    use_mmap: bool = True
    gpu: bool = True  # whether the llama.cpp build can offload at all


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes by place and kind."""

    weights_gpu: int
    weights_cpu: int
    kv_gpu: int
    kv_cpu: int
    compute_gpu: int
    compute_cpu: int
    overhead_gpu: int
    gpu_layers: int
    kv_cells: int

    @property
    def vram(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu + self.overhead_gpu

    @property
    def ram(self) -> int:
        return self.weights_cpu + self.kv_cpu + self.compute_cpu

    @property
    def kv(self) -> int:
        return self.kv_gpu + self.kv_cpu

    @property
    def total(self) -> int:
        return self.vram + self.ram

    def as_mib(self) -> dict[str, float]:
        keys = (
            "weights_gpu",
            "weights_cpu",
            "kv_gpu",
            "kv_cpu",
            "compute_gpu",
            "compute_cpu",
            "overhead_gpu",
        )
        out = {k: round(getattr(self, k) / MIB, 2) for k in keys}
        out.update(vram=round(self.vram / MIB, 2), ram=round(self.ram / MIB, 2))
        return out


def kv_layer_cells(desc: ModelDescription, s: FitSettings) -> list[int]:
    """KV cells per layer as llama.cpp allocates them."""
    n_ctx = _pad(max(s.n_ctx, 1), 256)
    swa_cells = n_ctx if s.swa_full else _pad(min(n_ctx, desc.n_swa + s.n_ubatch), 256)
    return [swa_cells if swa else n_ctx for swa in desc.swa_layers]


def kv_bytes_per_layer(desc: ModelDescription, s: FitSettings) -> list[int]:
    k_bytes, v_bytes = KV_TYPE_BYTES[s.type_k], KV_TYPE_BYTES[s.type_v]
    out = []
    for cells, heads_kv in zip(kv_layer_cells(desc, s), desc.n_head_kv, strict=False):
        per_cell = heads_kv * (desc.head_dim_k * k_bytes + desc.head_dim_v * v_bytes)
        out.append(int(cells * per_cell))
    return out


def _compute_bytes(desc: ModelDescription, s: FitSettings) -> int:
    """Peak of llama.cpp's worst-case graph (a full ubatch)."""
    ub = s.n_ubatch
    n_kv = _pad(max(s.n_ctx, 1), 256)
    n_head = max(desc.n_head) if desc.n_head else 1
    ffn = 2 * desc.n_ff * 4
    attention = n_kv * 6 if s.flash_attn else n_kv * (n_head + 1) * 4
    output = (desc.n_vocab + 2 * desc.n_embd) * 4
    return ub * max(output, attention + ffn)


def estimate(desc: ModelDescription, s: FitSettings) -> MemoryEstimate:
    """Memory for ``desc`` loaded with ``s``."""
    n_layer = desc.n_layer
    ngl = max(0, min(s.n_gpu_layers, n_layer + 1)) if s.gpu else 0
    first_gpu = n_layer - min(ngl, n_layer)
    on_gpu = [i >= first_gpu for i in range(n_layer)]
    output_gpu = ngl > n_layer
    w_gpu = sum(b for b, g in zip(desc.layer_bytes, on_gpu, strict=False) if g)
    w_cpu = desc.input_bytes + sum(
        b + r
        for b, r, g in zip(desc.layer_bytes, desc.layer_repack_bytes, on_gpu, strict=False)
        if not g
    )
    out_bytes = desc.input_bytes if desc.tied_output else desc.output_bytes
    if output_gpu:
        w_gpu += out_bytes
    elif not desc.tied_output:
        w_cpu += desc.output_bytes + desc.output_repack_bytes
    kv = kv_bytes_per_layer(desc, s)
    kv_gpu = sum(b for b, g in zip(kv, on_gpu, strict=False) if g)
    compute = _compute_bytes(desc, s)
    if ngl > 0:
        compute_gpu = compute
        compute_cpu = s.n_ubatch * desc.n_embd * 4 * 2
        overhead = GPU_RUNTIME_OVERHEAD
    else:
        compute_gpu, compute_cpu, overhead = 0, compute, 0
    return MemoryEstimate(
        weights_gpu=w_gpu,
        weights_cpu=w_cpu,
        kv_gpu=kv_gpu,
        kv_cpu=sum(kv) - kv_gpu,
        compute_gpu=compute_gpu,
        compute_cpu=compute_cpu,
        overhead_gpu=overhead,
        gpu_layers=ngl,
        kv_cells=max(kv_layer_cells(desc, s), default=0),
    )
