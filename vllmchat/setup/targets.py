"""The machines a plan can be made for: this one (detected), or a named platform whose
facts are given, so each platform's decisions can be shown and tested anywhere."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from vllmchat.core.machine.backend import MachineFacts

_CUDA_WIN = r"C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.6\bin\nvcc.exe"
_VULKAN_WIN = r"C:\VulkanSDK\1.4.304.0\Bin\glslc.exe"


@dataclass(frozen=True)
class Target:
    """A machine to plan for: its name, ``sys.platform`` value and detected facts."""

    name: str
    sys_platform: str  # "linux", "win32", "darwin": picks library names and folders
    facts: MachineFacts
    injected: bool = True  # False: this machine, as detected

    @property
    def system(self) -> str:
        return self.facts.system


PLATFORMS: dict[str, Target] = {
    "linux-cpu": Target("linux-cpu", "linux", MachineFacts(system="linux", machine="x86_64")),
    "linux-cuda": Target(
        "linux-cuda",
        "linux",
        MachineFacts(
            system="linux",
            machine="x86_64",
            nvidia_gpus=("NVIDIA GeForce RTX 4090",),
            nvidia_compute_caps=("8.9",),
            nvcc="/usr/local/cuda/bin/nvcc",
        ),
    ),
    "windows-cuda": Target(
        "windows-cuda",
        "win32",
        MachineFacts(
            system="windows",
            machine="amd64",
            nvidia_gpus=("NVIDIA GeForce RTX 4070",),
            nvidia_compute_caps=("8.9",),
            nvcc=_CUDA_WIN,
        ),
    ),
    "windows-vulkan": Target(
        "windows-vulkan",
        "win32",
        MachineFacts(
            system="windows",
            machine="amd64",
            other_gpus=1,
            vulkan_headers=True,
            glslc=_VULKAN_WIN,
        ),
    ),
    "windows-cpu": Target("windows-cpu", "win32", MachineFacts(system="windows", machine="amd64")),
    "macos-arm64": Target("macos-arm64", "darwin", MachineFacts(system="darwin", machine="arm64")),
}


def this_machine() -> Target:
    """This machine, as detected (GPUs, toolkits, the Vulkan SDK)."""
    from vllmchat.core.machine.detect import detect_machine

    facts = detect_machine()
    return Target(f"{facts.system}-{facts.machine}", sys.platform, facts, injected=False)
