"""What llama.cpp sees of this machine: its backends, their devices and free memory.

The same devices the engine will use; NVML is the fallback. Call ``probe()`` in the
engine process or a CLI: it loads llama.cpp's libraries (never the GUI process, where
a GPU backend would create a context).
"""

from __future__ import annotations

import ctypes
import os

import psutil

from vllmchat.core.machine.llama_libs import llama_library
from vllmchat.core.models.hardware import (
    BackendInfo,
    GpuInfo,
    HardwareInfo,
    apple_silicon,
    nvml_devices,
)

_GPU, _IGPU = 1, 2  # ggml_backend_dev_type


def _ggml() -> ctypes.CDLL | None:
    """llama.cpp's ggml library with the backend-registry functions typed."""
    import llama_cpp  # noqa: F401  (its loader loads ggml first, with its search paths set)

    try:
        ggml = ctypes.CDLL(str(llama_library("ggml")))
    except OSError:
        return None
    vp, size = ctypes.c_void_p, ctypes.c_size_t
    signatures = {
        "ggml_backend_reg_count": (size, []),
        "ggml_backend_reg_get": (vp, [size]),
        "ggml_backend_reg_name": (ctypes.c_char_p, [vp]),
        "ggml_backend_reg_dev_count": (size, [vp]),
        "ggml_backend_reg_dev_get": (vp, [vp, size]),
        "ggml_backend_dev_type": (ctypes.c_int, [vp]),
        "ggml_backend_dev_description": (ctypes.c_char_p, [vp]),
        "ggml_backend_dev_memory": (None, [vp, ctypes.POINTER(size), ctypes.POINTER(size)]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(ggml, name)
        fn.restype, fn.argtypes = restype, argtypes
    return ggml


def _device(ggml: ctypes.CDLL, dev: int) -> tuple[int, GpuInfo]:
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    ggml.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    name = (ggml.ggml_backend_dev_description(dev) or b"device").decode(errors="replace")
    return ggml.ggml_backend_dev_type(dev), GpuInfo(name, total.value, free.value)


def ggml_backends() -> tuple[BackendInfo, ...]:
    """The backends compiled into llama.cpp (CPU, CUDA, Vulkan, Metal, ...) and their devices."""
    ggml = _ggml()
    if ggml is None:
        return ()
    backends = []
    for i in range(ggml.ggml_backend_reg_count()):
        reg = ggml.ggml_backend_reg_get(i)
        name = (ggml.ggml_backend_reg_name(reg) or b"?").decode(errors="replace")
        count = ggml.ggml_backend_reg_dev_count(reg)
        devices = tuple(
            _device(ggml, ggml.ggml_backend_reg_dev_get(reg, j))[1] for j in range(count)
        )
        backends.append(BackendInfo(name, devices))
    return tuple(backends)


def _ggml_devices() -> tuple[list[GpuInfo], bool]:
    """The GPUs llama.cpp sees, and whether any shares the RAM (an integrated GPU)."""
    ggml = _ggml()
    if ggml is None:
        return [], False
    gpus, shared = [], False
    for i in range(ggml.ggml_backend_reg_count()):
        reg = ggml.ggml_backend_reg_get(i)
        for j in range(ggml.ggml_backend_reg_dev_count(reg)):
            kind, info = _device(ggml, ggml.ggml_backend_reg_dev_get(reg, j))
            if kind in (_GPU, _IGPU):
                gpus.append(info)
                shared = shared or kind == _IGPU
    return gpus, shared


def probe() -> HardwareInfo:
    """Read RAM, GPUs and the llama.cpp build's offload support."""
    vm = psutil.virtual_memory()
    try:
        import llama_cpp

        offload = bool(llama_cpp.llama_supports_gpu_offload())
        gpus, shared = _ggml_devices()
        backends = ggml_backends()
        system_info = llama_cpp.llama_print_system_info().decode(errors="replace").strip()
    except (ImportError, OSError, AttributeError):
        offload, gpus, shared, backends, system_info = False, [], False, (), ""
    if not gpus:
        gpus = nvml_devices()
    if offload and gpus:
        reason = ""
    elif offload:
        reason = "llama.cpp can offload, but no GPU was found."
    elif gpus:
        from vllmchat.core.machine.backend import rebuild_advice
        from vllmchat.core.machine.detect import detect_machine

        reason = f"This llama.cpp build is CPU-only: {rebuild_advice(detect_machine())}."
    else:
        reason = "No GPU was found and this llama.cpp build is CPU-only."
    unified = apple_silicon() or shared  # Metal's "free" is its working-set limit
    return HardwareInfo(
        vm.total,
        vm.available,
        gpus,
        offload and bool(gpus),
        reason,
        backends,
        system_info,
        unified,
        runtime_context=_runtime_context() if offload and gpus else 0,
    )


def _runtime_context() -> int:
    """This process's device memory now that llama.cpp has read the GPUs' memory, which
    starts the GPU runtime: its context (0 where NVML cannot see the process)."""
    from vllmchat.core.machine.nvml import process_vram

    return process_vram(os.getpid()) or 0
