"""Estimate the memory llama.cpp will allocate for a model and settings.

Weights split by layer between GPU and CPU (llama.cpp offloads the output
head first, then the last ``n_gpu_layers - 1`` layers; with ``n_cpu_moe`` the
expert tensors of the first layers stay in RAM while the rest of those layers
is offloaded; offloaded layers are shared between GPUs by ``tensor_split`` or
their free memory), the KV cache per layer as llama.cpp sizes it (context padded to 256,
sliding-window layers sized to the window plus a ubatch), compute buffers
from the worst-case graph (the logits of a full ubatch, or the attention
scores without flash attention), and the GPU runtime's own overhead.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.description import ModelDescription, describe
from vllmchat.core.models.memory_estimate import MIB as MIB
from vllmchat.core.models.memory_estimate import MemoryEstimate
from vllmchat.core.models.projector import ProjectorInfo, read_projector
from vllmchat.core.placement import Placement, all_layers, parse_overrides
from vllmchat.core.settings import LoadSettings

GPU_RUNTIME_OVERHEAD = 350 * MIB  # CUDA context, cuBLAS workspace (until measured: overhead.py)
# A projector on the GPU opens its own GPU backend (its cuBLAS handles and memory pool):
# measured on an H200 (CUDA 13) as 261 MiB beyond the projector's weights and compute
# buffer, against a text-only load of the same model.
PROJECTOR_GPU_RUNTIME = 261 * MIB
KV_TYPE_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "f32": 4.0}


_LOAD = LoadSettings(model_path="")  # the one set of defaults


def _same(name: str) -> Any:
    """A field with ``LoadSettings``' default and help for ``name``."""
    meta = next(f.metadata for f in fields(LoadSettings) if f.name == name)
    return field(default=getattr(_LOAD, name), metadata=meta)


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """The load settings that decide memory (their defaults are ``LoadSettings``')."""

    placement: Placement = field(default_factory=Placement)
    n_ctx: int = _same("n_ctx")
    n_ubatch: int = _same("n_ubatch")
    type_k: str = _same("type_k")
    type_v: str = _same("type_v")
    flash_attn: bool = _same("flash_attn")
    swa_full: bool = _same("swa_full")
    use_mmap: bool = _same("use_mmap")
    gpu: bool = True  # whether the llama.cpp build can offload at all
    gpu_overhead: int = GPU_RUNTIME_OVERHEAD  # the GPU runtime's own memory (learned per device)
    # Free memory per GPU, as llama.cpp's default split reads it (one entry or none: one GPU).
    gpu_free: tuple[int, ...] = ()
    # A draft model beside it (speculative decoding): its own GPU memory and RAM.
    draft_vram: int = 0
    draft_ram: int = 0
    # A multimodal projector beside it: its weights and its encoder's compute buffer
    # (on the GPU when layers are), and the context tokens one image takes.
    projector_bytes: int = 0
    # The image's F32 pixels, in a host buffer the encoder copies to the GPU from
    projector_input_bytes: int = 0
    image_tokens: int = 0

    @classmethod
    def of(
        cls,
        load: LoadSettings,
        *,
        gpu: bool = True,
        overhead: int = GPU_RUNTIME_OVERHEAD,
        gpu_free: tuple[int, ...] = (),
    ) -> FitSettings:
        """The memory-relevant part of ``load``."""
        names = {f.name for f in fields(cls)} - {"gpu", "gpu_overhead", "gpu_free"} - _DRAFT
        draft = draft_need(load, gpu=gpu)
        made = cls(
            gpu=gpu,
            gpu_overhead=overhead,
            gpu_free=gpu_free,
            draft_vram=draft.vram if draft else 0,
            draft_ram=draft.ram if draft else 0,
            **{name: getattr(load, name) for name in names},
        )
        return made.with_projector(projector_need(load.mmproj_path))

    def with_projector(self, projector: ProjectorInfo | None) -> FitSettings:
        """These settings with ``projector`` beside the model: its weights, its
        encoder's compute buffer, and the context tokens one image takes."""
        if projector is None:
            return replace(self, projector_bytes=0, projector_input_bytes=0, image_tokens=0)
        need = projector.weights_bytes + projector.encode_bytes
        return replace(
            self,
            projector_bytes=need,
            projector_input_bytes=projector.input_bytes,
            image_tokens=projector.image_tokens,
        )

    def with_placement(self, placement: Placement) -> FitSettings:
        """These settings at another placement (the offload panel's what-if)."""
        return replace(self, placement=placement)

    def placed(self, **changes: Any) -> FitSettings:
        """These settings with some of the placement's fields changed."""
        return replace(self, placement=replace(self.placement, **changes))

    def gpu_layers(self, n_layer: int) -> int:
        """The layers (the output head among them) offloaded: none without a GPU."""
        return self.placement.gpu_layers(n_layer) if self.gpu else 0

    def split_points(self) -> list[float]:
        """Cumulative shares of the offloaded layers per GPU, as llama.cpp computes them."""
        shares = list(self.placement.split)
        n_dev = max(len(self.gpu_free), 1)
        if not any(shares):
            shares = [float(f) for f in self.gpu_free] if any(self.gpu_free) else [1.0]
        shares = (shares + [0.0] * n_dev)[: max(n_dev, len(shares))]
        total = sum(shares) or 1.0
        points, run = [], 0.0
        for x in shares:
            run += x
            points.append(run / total)
        return points


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
    """Peak of llama.cpp's worst-case graph (a full ubatch), per token times n_ubatch.

    Fitted to the compute buffers llama.cpp reports: the larger of the attention
    phase (scores of every head over the whole cache without flash attention),
    the feed-forward phase, and the output phase (logits of the whole ubatch).
    """
    n_kv = _pad(max(s.n_ctx, 1), 256)
    e, f = desc.n_embd, desc.n_ff
    n_head = max(desc.n_head) if desc.n_head else 1
    kv_dim = max(desc.n_head_kv, default=1) * desc.head_dim_k
    ffn = 12 * f + 12 * e + 2 * n_kv + 20
    if desc.n_expert_used:
        # A mixture of experts: the router's scores, then the chosen experts' FFNs.
        f_moe = desc.n_expert_used * (desc.n_ff_exp or f // max(desc.n_expert_used, 1))
        ffn = 12 * f_moe + 4 * desc.n_expert_used * e + 8 * desc.n_expert + 12 * e + 2 * n_kv + 20
    output = 4 * (desc.n_vocab + 2 * e)
    if s.flash_attn:
        attention = 49 * e + 2 * n_kv
    else:
        attention = 20 * e + 8 * kv_dim + 4 * (n_head + 1) * n_kv + 20
    return s.n_ubatch * max(attention, ffn, output)


def _kept_in_ram(desc: ModelDescription, s: FitSettings) -> list[bool]:
    """Per tensor: whether an override keeps it in RAM although its layer is offloaded
    (the experts of the first ``n_cpu_moe`` layers, and ``override_tensors``' rules)."""
    rules = [re.compile(p) for p in parse_overrides(s.placement.override_tensors)]
    return [
        (t.expert and 0 <= t.layer < s.placement.n_cpu_moe) or any(r.search(t.name) for r in rules)
        for t in desc.tensors
    ]


def _cpu_weights(
    desc: ModelDescription,
    on_gpu: list[bool],
    kept: list[bool],
    output_gpu: bool,
    use_mmap: bool,
    *,
    repack: bool,
) -> int:
    """CPU weight buffers: repacked copies, plus the mapped file span (or the bytes)."""
    repacked = 0
    start, end, plain = None, 0, 0
    for t, in_ram in zip(desc.tensors, kept, strict=True):
        if t.layer >= 0 and on_gpu[t.layer] and not in_ram:
            continue
        if t.layer == -2 and output_gpu and not in_ram:
            continue
        if t.repack and repack:
            repacked += t.n_bytes
            continue
        plain += t.n_bytes
        start = t.offset if start is None else min(start, t.offset)
        end = max(end, t.offset + t.n_bytes)
    mapped = (end - start) if (use_mmap and start is not None) else plain
    return mapped + repacked


def layer_devices(desc: ModelDescription, s: FitSettings) -> list[int]:
    """The GPU of each layer and of the output head (the last entry); -1: the CPU.

    llama.cpp's rule: the offloaded layers are the last ``n_gpu_layers`` of
    ``all_layers(n_layer)`` (the output head counts as the last one), shared between GPUs
    at the split points.
    """
    n_layer = desc.n_layer
    ngl = s.gpu_layers(n_layer)
    start = all_layers(n_layer) - ngl
    points = s.split_points()
    out = []
    for il in range(all_layers(n_layer)):
        if il < start or ngl == 0:
            out.append(-1)
            continue
        share = (il - start) / ngl
        dev = next((i for i, p in enumerate(points) if share < p), len(points) - 1)
        out.append(dev)
    return out


def estimate(desc: ModelDescription, s: FitSettings) -> MemoryEstimate:
    """Memory for ``desc`` loaded with ``s``."""
    n_layer = desc.n_layer
    ngl = s.gpu_layers(n_layer)
    devices = layer_devices(desc, s)
    n_dev = max(len(s.split_points()), 1)
    on_gpu = [d >= 0 for d in devices[:n_layer]]
    output_gpu = devices[n_layer] >= 0
    kept = _kept_in_ram(desc, s)
    per_dev = [0] * n_dev
    experts_cpu = [False] * n_layer  # offloaded layers with expert tensors in RAM
    for t, in_ram in zip(desc.tensors, kept, strict=True):
        dev = devices[t.layer] if t.layer >= 0 else devices[n_layer] if t.layer == -2 else -1
        if dev < 0:
            continue
        if in_ram:
            if t.expert:
                experts_cpu[t.layer] = True
            continue
        per_dev[dev] += t.n_bytes
    out_bytes = desc.input_bytes if desc.tied_output else desc.output_bytes
    if output_gpu and desc.tied_output:
        per_dev[devices[n_layer]] += out_bytes  # llama.cpp's copy of the token embeddings
    # A GPU build does not repack CPU weights (the repacked layouts are CPU-only).
    w_cpu = _cpu_weights(desc, on_gpu, kept, output_gpu, s.use_mmap, repack=not s.gpu)
    kv = kv_bytes_per_layer(desc, s)
    kv_dev = [0] * n_dev
    for b, dev in zip(kv, devices[:n_layer], strict=False):
        if dev >= 0:
            kv_dev[dev] += b
    compute = _compute_bytes(desc, s)
    cpu_moe = sum(1 for i in range(n_layer) if on_gpu[i] and experts_cpu[i])
    used = [d for d in range(n_dev) if per_dev[d] or kv_dev[d]] or [0]
    compute_dev = [0] * n_dev
    overhead_dev = [0] * n_dev
    if s.gpu:
        # A GPU build computes the big matmuls on the GPU even with no layer offloaded;
        # the host keeps a pinned staging buffer (measured on CUDA: 10 or 14 x n_embd).
        for d in used:
            compute_dev[d] = compute
            overhead_dev[d] = s.gpu_overhead
        if ngl == 0:
            # With no layer offloaded, the big matmuls of a prompt still run on the
            # GPU and their weights are copied into its compute buffer: measured on
            # CUDA as the largest of them, the output matrix, on top.
            compute_dev[0] += out_bytes
        elif desc.n_expert_used and any(on_gpu[i] and not experts_cpu[i] for i in range(n_layer)):
            # Experts computed on the GPU keep their FFN activations beside the
            # ubatch's logits (measured on CUDA, Qwen3-MoE shapes: 3 x n_ubatch x
            # n_expert_used x n_ff_exp floats on top). Experts in RAM are computed
            # by the CPU and add nothing to the GPU's compute buffer.
            moe = 3 * 4 * s.n_ubatch * desc.n_expert_used * desc.n_ff_exp
            first = next(d for d in devices[:n_layer] if d >= 0)
            compute_dev[first] += moe
        compute_cpu = s.n_ubatch * desc.n_embd * (10 if s.flash_attn else 14)
    else:
        compute_cpu = compute
    draft_gpu = s.draft_vram if s.gpu else 0
    # mtmd's use_gpu: the projector, and its encoder's own GPU backend beside it
    projector_gpu = (
        s.projector_bytes + PROJECTOR_GPU_RUNTIME if s.gpu and ngl > 0 and s.projector_bytes else 0
    )
    first = draft_gpu + projector_gpu
    by_device = tuple(
        per_dev[d] + kv_dev[d] + compute_dev[d] + overhead_dev[d] + (first if d == 0 else 0)
        for d in range(n_dev)
    )
    return MemoryEstimate(
        weights_gpu=sum(per_dev),
        weights_cpu=w_cpu,
        kv_gpu=sum(kv_dev),
        kv_cpu=sum(kv) - sum(kv_dev),
        compute_gpu=sum(compute_dev),
        compute_cpu=compute_cpu,
        overhead_gpu=sum(overhead_dev),
        gpu_layers=ngl,
        kv_cells=max(kv_layer_cells(desc, s), default=0),
        cpu_moe_layers=cpu_moe,
        vram_by_device=by_device if s.gpu else (),
        draft_gpu=draft_gpu,
        draft_cpu=s.draft_ram,
        projector_gpu=projector_gpu,
        projector_cpu=s.projector_bytes if not projector_gpu else s.projector_input_bytes,
        image_tokens=s.image_tokens,
    )


_DRAFT = {"draft_vram", "draft_ram", "projector_bytes", "projector_input_bytes", "image_tokens"}


def projector_need(path: str) -> ProjectorInfo | None:
    """The projector of ``mmproj_path`` (None: none, or it cannot be read; loading it
    then says why)."""
    if not path:
        return None
    try:
        return read_projector(path)
    except (OSError, ValueError, KeyError):
        return None


def draft_need(load: LoadSettings, *, gpu: bool = True) -> MemoryEstimate | None:
    """What the draft model of ``load`` adds (None: none, or its file cannot be read;
    loading it then says why). It shares the model's GPU runtime and context size."""
    if not load.draft_model:
        return None
    try:
        stat = os.stat(load.draft_model)
    except OSError:
        return None
    return _draft_need(
        load.draft_model,
        stat.st_mtime_ns,
        stat.st_size,
        load.draft_n_gpu_layers,
        load.n_ctx,
        load.flash_attn,
        gpu,
    )


@functools.lru_cache(maxsize=8)
def _draft_need(
    path: str, _mtime: int, _size: int, ngl: int, n_ctx: int, flash_attn: bool, gpu: bool
) -> MemoryEstimate | None:
    try:
        desc = describe(read_header(path))
    except (OSError, ValueError, KeyError):
        return None
    # The engine opens the draft's context without swa_full: llama.cpp's default keeps
    # every sliding-window cell (measured: Gemma 3 270M's KV 36 MiB at n_ctx 2048, not 21).
    fit = FitSettings(
        placement=Placement(n_gpu_layers=ngl),
        n_ctx=n_ctx,
        flash_attn=flash_attn,
        gpu=gpu,
        gpu_overhead=0,
        swa_full=True,
    )
    return estimate(desc, fit)
