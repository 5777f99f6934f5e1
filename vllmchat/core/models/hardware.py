"""What this machine offers: RAM, GPUs with free memory, and whether llama.cpp can offload.

``quick_probe()`` reads RAM and NVIDIA GPUs without llama.cpp (safe anywhere: NVML on
Linux and Windows); ``hardware_probe.probe()`` asks llama.cpp's own device API.

On Apple silicon (and integrated GPUs) RAM and GPU memory are one pool
(``unified``): a GPU's "free" is then the most the GPU may use of it (Metal's
working-set limit, as llama.cpp's device list reports it), and what the GPU holds
is taken from the same RAM the CPU's part uses.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass, field

import psutil

from vllmchat.core.machine import nvml


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: name, total and free memory in bytes."""

    name: str
    total: int
    free: int
    source: str = "llama.cpp"


@dataclass(frozen=True)
class BackendInfo:
    """One backend compiled into llama.cpp (ggml's registry) and the devices it sees."""

    name: str
    devices: tuple[GpuInfo, ...] = ()


@dataclass(frozen=True)
class HardwareInfo:
    """RAM, GPUs, and whether this llama.cpp build can offload layers."""

    ram_total: int
    ram_available: int
    gpus: list[GpuInfo] = field(default_factory=list)
    gpu_offload: bool = False
    offload_reason: str = ""
    backends: tuple[BackendInfo, ...] = ()
    system_info: str = ""  # llama_print_system_info(): the CPU features compiled in
    unified: bool = False  # GPU memory is the RAM (Apple silicon, integrated GPUs)
    # The probing process's own device memory once the GPU runtime has started (its
    # CUDA context and loaded kernels, read from NVML per process; 0: not known).
    runtime_context: int = 0

    @property
    def gpu_limit(self) -> int:
        """The most the GPUs may hold: their free memory, or on one pool the smaller of
        the GPU's working-set limit and the available RAM."""
        return min(self.vram_free, self.ram_available) if self.unified else self.vram_free

    @property
    def vram_free(self) -> int:
        return sum(g.free for g in self.gpus)

    @property
    def vram_total(self) -> int:
        return sum(g.total for g in self.gpus)


def apple_silicon(system: str = sys.platform, machine: str | None = None) -> bool:
    """Whether this is a Mac with an Apple GPU (arm64): one memory pool."""
    machine = platform.machine().lower() if machine is None else machine
    return system == "darwin" and machine == "arm64"


def nvml_devices() -> list[GpuInfo]:
    return [GpuInfo(d.name, d.total, d.free, "nvml") for d in nvml.devices()]


def quick_probe() -> HardwareInfo:
    """RAM and NVIDIA GPUs without loading llama.cpp (safe in the GUI process, instant).

    Offload support is unknown until the engine probes, so fits are RAM-only.
    """
    vm = psutil.virtual_memory()
    reason = "Offload is known once a model is loaded."
    return HardwareInfo(
        vm.total, vm.available, nvml_devices(), False, reason, unified=apple_silicon()
    )
