"""NVIDIA's management library through ctypes: device memory and per-process VRAM.

Stdlib only and safe anywhere: it never creates a CUDA context. NVML comes with the
NVIDIA driver on Linux and Windows; every function answers ``[]`` / ``None`` where
NVML (or an NVIDIA driver) is absent, as on macOS.
"""

from __future__ import annotations

import ctypes
import functools
import ntpath
import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class NvmlDevice:
    """One GPU as NVML sees it (bytes)."""

    name: str
    total: int
    free: int


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t (v2 and v3 calls)
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


def library_candidates(
    platform: str = sys.platform, env: dict[str, str] | None = None
) -> tuple[str, ...]:
    """Where NVML is on ``platform``: the driver's ``libnvidia-ml.so.1`` on Linux;
    ``nvml.dll`` in System32 on Windows (older drivers: in NVSMI); none on macOS."""
    env = dict(os.environ) if env is None else env
    if platform == "win32":
        system32 = ntpath.join(env.get("SystemRoot", "C:\\Windows"), "System32", "nvml.dll")
        programs = env.get("ProgramFiles", "C:\\Program Files")
        nvsmi = ntpath.join(programs, "NVIDIA Corporation", "NVSMI", "nvml.dll")
        return ("nvml.dll", system32, nvsmi)
    if platform == "darwin":
        return ()
    return ("libnvidia-ml.so.1",)


@functools.cache
def _library() -> ctypes.CDLL | None:
    """NVML, loaded and initialised once per process (the memory panel asks every few
    seconds on the GUI thread: initialising each time would cost tens of ms there)."""
    for candidate in library_candidates():
        try:
            lib = ctypes.CDLL(candidate)
        except OSError:
            continue
        return lib if lib.nvmlInit_v2() == 0 else None
    return None


def _handles(lib: ctypes.CDLL) -> list[ctypes.c_void_p]:
    count = ctypes.c_uint()
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        return []
    handles = []
    for i in range(count.value):
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) == 0:
            handles.append(handle)
    return handles


def devices() -> list[NvmlDevice]:
    """Name, total and free memory of each NVIDIA GPU."""
    lib = _library()
    if lib is None:
        return []
    out = []
    for handle in _handles(lib):
        mem = _Memory()
        if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) != 0:
            continue
        name = ctypes.create_string_buffer(96)
        lib.nvmlDeviceGetName(handle, name, 96)
        out.append(NvmlDevice(name.value.decode(errors="replace"), mem.total, mem.free))
    return out


def compute_capabilities() -> list[tuple[int, int]]:
    """Each NVIDIA GPU's CUDA compute capability, e.g. (9, 0) for an H100/H200."""
    lib = _library()
    if lib is None:
        return []
    found = []
    for handle in _handles(lib):
        major, minor = ctypes.c_int(), ctypes.c_int()
        call = lib.nvmlDeviceGetCudaComputeCapability
        if call(handle, ctypes.byref(major), ctypes.byref(minor)) == 0:
            found.append((major.value, minor.value))
    return found


def free_bytes() -> int | None:
    """Free memory summed over NVIDIA GPUs (None without NVML)."""
    found = devices()
    return sum(d.free for d in found) if found else None


def process_vram(pid: int) -> int | None:
    """Device memory that ``pid`` holds on all NVIDIA GPUs, as the driver counts it.

    None when NVML cannot tell (no driver, or a PID namespace hides the process).
    """
    lib = _library()
    if lib is None:
        return None
    total, seen = 0, False
    for handle in _handles(lib):
        for fn in (
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses_v2",
        ):
            call = getattr(lib, fn, None)
            if call is None:
                continue
            count = ctypes.c_uint(64)
            infos = (_ProcessInfo * 64)()
            if call(handle, ctypes.byref(count), infos) != 0:
                continue
            for info in infos[: count.value]:
                if info.pid == pid and info.usedGpuMemory < (1 << 62):
                    total += info.usedGpuMemory
                    seen = True
            break
    return total if seen else None
