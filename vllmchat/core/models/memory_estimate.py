"""What the memory estimate says: bytes by place (GPU, RAM) and kind (weights, KV cache,
compute buffers, the GPU runtime, a draft model, a projector)."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


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
    cpu_moe_layers: int = 0  # offloaded layers whose experts stay in RAM
    vram_by_device: tuple[int, ...] = ()  # per GPU (their sum is ``vram``)
    draft_gpu: int = 0  # a draft model's share (on the first GPU)
    draft_cpu: int = 0
    projector_gpu: int = 0  # a multimodal projector (on the first GPU)
    projector_cpu: int = 0
    image_tokens: int = 0  # context tokens one image takes (0: no projector)

    @property
    def vram(self) -> int:
        on_gpu = self.weights_gpu + self.kv_gpu + self.compute_gpu + self.overhead_gpu
        return on_gpu + self.draft_gpu + self.projector_gpu

    @property
    def ram(self) -> int:
        own = self.weights_cpu + self.kv_cpu + self.compute_cpu
        return own + self.draft_cpu + self.projector_cpu

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
            "draft_gpu",
            "draft_cpu",
            "projector_gpu",
            "projector_cpu",
        )
        out = {k: round(getattr(self, k) / MIB, 2) for k in keys}
        out.update(vram=round(self.vram / MIB, 2), ram=round(self.ram / MIB, 2))
        return out
