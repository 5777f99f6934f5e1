"""What this OS needs installed to (re)build llama.cpp for its best backend: a C/C++
compiler (the Visual Studio Build Tools, the Xcode command-line tools, or Linux's
build-essential), the CUDA toolkit where an NVIDIA GPU is, the Vulkan SDK on Windows."""

from __future__ import annotations

from vllmchat.core.doctor.findings import Finding, Status
from vllmchat.core.machine.backend import MachineFacts
from vllmchat.core.machine.install_hints import install_hint, setup_command

_COMPILER_NAMES = {
    "windows": "the Visual Studio Build Tools (C++)",
    "darwin": "the Xcode command-line tools",
}


def build_tools(facts: MachineFacts, compiler: str | None) -> Finding:
    """The first missing thing a llama.cpp build for this machine's GPU needs, with the
    exact thing to install; OK when nothing is missing."""
    system = facts.system
    named = _COMPILER_NAMES.get(system, "a C/C++ compiler")
    data = {"compiler": compiler, "nvcc": facts.nvcc, "vulkan_sdk": facts.vulkan_ready}
    if compiler is None:
        return Finding(
            "build_tools",
            "Build tools",
            Status.WARN,
            f"{named} not found: llama.cpp cannot be built or rebuilt here "
            "(a cached build still installs)",
            f"install {install_hint('compiler', system)}",
            data,
        )
    if facts.nvidia_gpus and not facts.nvcc and system != "darwin":
        return Finding(
            "build_tools",
            "Build tools",
            Status.WARN,
            f"an NVIDIA GPU ({facts.nvidia_gpus[0]}) but no CUDA toolkit: llama.cpp is "
            "built without CUDA",
            f"{install_hint('cuda', system)}; then: {setup_command(system, 'cuda')}",
            data,
        )
    if facts.nvcc and not facts.nvidia_gpus:
        return Finding(
            "build_tools",
            "Build tools",
            Status.INFO,
            f"a CUDA toolkit ({facts.nvcc}) but no NVIDIA GPU answers: the CPU build is used; "
            f"if this machine has one, {install_hint('driver', system)}",
            data=data,
        )
    if system == "windows" and not facts.nvidia_gpus and not facts.vulkan_ready:
        return Finding(
            "build_tools",
            "Build tools",
            Status.INFO,
            "no CUDA GPU and no Vulkan SDK: llama.cpp is built for the CPU",
            f"for a GPU build, {install_hint('vulkan', system)}; then: "
            f"{setup_command(system, 'vulkan')}",
            data,
        )
    return Finding("build_tools", "Build tools", Status.OK, f"{named}: {compiler}", data=data)
