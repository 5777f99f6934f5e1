"""``doctor`` names the exact thing to install on each OS (facts injected: no Windows
or macOS machine runs these tests)."""

from __future__ import annotations

import pytest

from vllmchat.core.doctor.build_checks import build_tools
from vllmchat.core.doctor.findings import Status
from vllmchat.core.machine.backend import MachineFacts


@pytest.mark.parametrize(
    ("system", "names"),
    [
        ("windows", ["Visual Studio Build Tools 2022", "Microsoft.VisualStudio.Workload.VCTools"]),
        ("darwin", ["Xcode command-line tools", "xcode-select --install"]),
        ("linux", ["build-essential"]),
    ],
)
def test_no_compiler_names_the_os_build_tools(system, names):
    found = build_tools(MachineFacts(system=system), None)
    assert found.status is Status.WARN
    assert all(n in found.fix for n in names), found.fix


def test_a_windows_nvidia_gpu_without_the_toolkit_names_the_cuda_toolkit():
    facts = MachineFacts(system="windows", nvidia_gpus=("NVIDIA GeForce RTX 4070",))
    found = build_tools(facts, r"C:\BuildTools")
    assert found.status is Status.WARN and "CUDA Toolkit for Windows" in found.fix
    assert found.fix.endswith('$env:VLLMCHAT_BACKEND="cuda"; scripts\\setup.ps1')


def test_windows_without_cuda_or_vulkan_names_the_vulkan_sdk():
    found = build_tools(MachineFacts(system="windows"), r"C:\BuildTools")
    assert "Vulkan SDK" in found.fix and "vulkan.lunarg.com" in found.fix


def test_a_linux_toolkit_without_a_gpu_is_told_not_failed():
    found = build_tools(MachineFacts(nvcc="/usr/local/cuda/bin/nvcc"), "/usr/bin/c++")
    assert found.status is Status.INFO and "NVIDIA driver" in found.detail


def test_a_complete_machine_is_ok():
    facts = MachineFacts(system="darwin", machine="arm64")
    assert build_tools(facts, "/Library/Developer/CommandLineTools").status is Status.OK
