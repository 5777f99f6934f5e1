"""What this machine offers: RAM, GPUs with free memory, and whether llama.cpp can offload.

GPUs are read through llama.cpp's backend device API (the same devices the
engine will use); NVML is the fallback. Call ``probe()`` in the engine process
or a CLI: it loads llama.cpp's libraries (never the GUI process, where a GPU
backend would create a context).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path

import psutil

_GPU, _IGPU = 1, 2  # ggml_backend_dev_type


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: name, total and free memory in bytes."""

    name: str
    total: int
    free: int
    source: str = "llama.cpp"


@dataclass(frozen=True)
class HardwareInfo:
    """RAM, GPUs, and whether this llama.cpp build can offload layers."""

    ram_total: int
    ram_available: int
    gpus: list[GpuInfo] = field(default_factory=list)
    gpu_offload: bool = False
    offload_reason: str = ""

    @property
    def vram_free(self) -> int:
        return sum(g.free for g in self.gpus)

    @property
    def vram_total(self) -> int:
        return sum(g.total for g in self.gpus)


def _ggml_devices() -> list[GpuInfo]:
    import llama_cpp

    lib_dir = Path(os.environ.get("LLAMA_CPP_LIB_PATH") or Path(llama_cpp.__file__).parent / "lib")
    try:
        ggml = ctypes.CDLL(str(lib_dir / "libggml.so"))
    except OSError:
        return []
    ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    ggml.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_description.restype = ctypes.c_char_p
    ggml.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
    ]  # fmt: skip
    gpus = []
    for i in range(ggml.ggml_backend_dev_count()):
        dev = ggml.ggml_backend_dev_get(i)
        if ggml.ggml_backend_dev_type(dev) not in (_GPU, _IGPU):
            continue
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        name = (ggml.ggml_backend_dev_description(dev) or b"GPU").decode(errors="replace")
        gpus.append(GpuInfo(name, total.value, free.value))
    return gpus


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]  # fmt: skip


def _nvml_devices() -> list[GpuInfo]:
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return []
    if nvml.nvmlInit_v2() != 0:
        return []
    gpus = []
    try:
        count = ctypes.c_uint()
        nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                continue
            mem = _NvmlMemory()
            nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
            name = ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, 96)
            gpus.append(GpuInfo(name.value.decode(errors="replace"), mem.total, mem.free, "nvml"))
    finally:
        nvml.nvmlShutdown()
    return gpus


def probe() -> HardwareInfo:
    """Read RAM, GPUs and the llama.cpp build's offload support."""
    vm = psutil.virtual_memory()
    try:
        import llama_cpp

        offload = bool(llama_cpp.llama_supports_gpu_offload())
        gpus = _ggml_devices()
    except (ImportError, OSError, AttributeError):
        offload, gpus = False, []
    if not gpus:
        gpus = _nvml_devices()
    if offload and gpus:
        reason = ""
    elif offload:
        reason = "llama.cpp can offload, but no GPU was found."
    elif gpus:
        reason = "This llama.cpp build is CPU-only; rebuild it with CUDA, Metal or Vulkan."
    else:
        reason = "No GPU was found and this llama.cpp build is CPU-only."
    return HardwareInfo(vm.total, vm.available, gpus, offload and bool(gpus), reason)
