"""The llama.cpp backend the set-up builds, as a pure function of what was detected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllmchat.core.machine.backend import (
    PORTABLE_CPU_ARGS,
    MachineFacts,
    choose_backend,
    cuda_architectures,
    rebuild_advice,
)

ROOT = Path(__file__).resolve().parents[1]
H200 = MachineFacts(nvidia_gpus=("NVIDIA H200",), nvidia_compute_caps=("9.0",), nvcc="/cuda/nvcc")


def test_nvidia_gpu_with_toolkit_builds_cuda_for_the_local_architecture():
    choice = choose_backend(H200)
    assert choice.backend == "cuda" and choice.ok
    assert "-DGGML_CUDA=on" in choice.cmake_args
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in choice.cmake_args
    assert "NVIDIA H200" in choice.reason and "/cuda/nvcc" in choice.reason


@pytest.mark.parametrize(
    "facts",
    [
        H200,
        MachineFacts(amd_gpus=1, hipcc="/opt/rocm/bin/hipcc", amd_gfx=("gfx1100",)),
        MachineFacts(other_gpus=1, vulkan_headers=True, glslc="/usr/bin/glslc"),
        MachineFacts(system="darwin"),
        MachineFacts(),
    ],
)
def test_the_cpu_side_stays_portable_in_every_backend(facts):
    choice = choose_backend(facts)
    assert set(PORTABLE_CPU_ARGS) <= set(choice.cmake_args)
    assert not any("NATIVE=ON" in a or "march=native" in a for a in choice.cmake_args)


def test_several_gpus_give_every_architecture():
    assert cuda_architectures(("8.6", "9.0", "8.6", "12.0")) == "86;90;120"
    assert cuda_architectures(()) is None


def test_nvidia_gpu_without_toolkit_falls_back_and_says_why():
    choice = choose_backend(MachineFacts(nvidia_gpus=("RTX 4060",)))
    assert choice.backend == "cpu" and choice.ok
    assert any("no CUDA toolkit" in n and "nvcc" in n for n in choice.notes)


def test_nvidia_gpu_without_toolkit_uses_vulkan_when_it_can():
    facts = MachineFacts(nvidia_gpus=("RTX 4060",), vulkan_headers=True, glslc="/usr/bin/glslc")
    choice = choose_backend(facts)
    assert choice.backend == "vulkan" and "-DGGML_VULKAN=on" in choice.cmake_args
    assert choice.apt_packages == ()


def test_amd_gpu_with_hipcc_builds_hip_for_its_targets():
    choice = choose_backend(
        MachineFacts(amd_gpus=1, hipcc="/opt/rocm/bin/hipcc", amd_gfx=("gfx1100",))
    )
    assert choice.backend == "hip"
    assert "-DGGML_HIP=on" in choice.cmake_args and "-DAMDGPU_TARGETS=gfx1100" in choice.cmake_args


def test_a_gpu_as_root_with_apt_gets_vulkan_requirements_installed():
    choice = choose_backend(MachineFacts(other_gpus=1, apt_as_root=True))
    assert choice.backend == "vulkan" and choice.apt_packages == ("libvulkan-dev", "glslc")


def test_a_gpu_without_vulkan_requirements_and_no_apt_falls_back_to_cpu():
    choice = choose_backend(MachineFacts(amd_gpus=1))
    assert choice.backend == "cpu"
    assert any("hipcc" in n for n in choice.notes) and any("glslc" in n for n in choice.notes)


def test_macos_uses_metal():
    choice = choose_backend(MachineFacts(system="darwin"))
    assert choice.backend == "metal" and choice.ok


def test_no_gpu_builds_cpu_even_with_a_toolkit():
    choice = choose_backend(MachineFacts(nvcc="/usr/local/bin/nvcc"))
    assert choice.backend == "cpu" and choice.cmake_args == PORTABLE_CPU_ARGS
    assert any("no NVIDIA GPU" in n for n in choice.notes)


@pytest.mark.parametrize(
    ("backend", "facts", "needs"),
    [
        ("cuda", MachineFacts(nvidia_gpus=("RTX 4060",)), "nvcc"),
        ("vulkan", MachineFacts(other_gpus=1, vulkan_headers=True), "glslc"),
        ("vulkan", MachineFacts(other_gpus=1), "headers and glslc"),
        ("hip", MachineFacts(amd_gpus=1), "hipcc"),
        ("metal", MachineFacts(), "macOS"),
        ("opencl", MachineFacts(), "not one of"),
    ],
)
def test_a_forced_backend_whose_requirements_are_missing_fails_with_what_to_install(
    backend, facts, needs
):
    choice = choose_backend(facts, backend)
    assert not choice.ok and needs in choice.error and choice.cmake_args == ()


def test_a_forced_backend_wins_over_detection():
    assert choose_backend(H200, "cpu").backend == "cpu"
    assert choose_backend(MachineFacts(nvcc="/x/nvcc"), "cuda").backend == "cuda"
    assert (
        choose_backend(MachineFacts(other_gpus=1, apt_as_root=True), "VULKAN").backend == "vulkan"
    )


def test_rebuild_advice_names_the_exact_command():
    assert rebuild_advice(H200).endswith("VLLMCHAT_BACKEND=cuda scripts/setup.sh")
    advice = rebuild_advice(MachineFacts(nvidia_gpus=("RTX 4060",)))
    assert "nvcc" in advice and advice.endswith("VLLMCHAT_BACKEND=cuda scripts/setup.sh")


def _plan(backend: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VLLMCHAT_BACKEND": backend}
    return subprocess.run(
        [sys.executable, "-m", "vllmchat.setup.plan"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_setup_plan_on_this_machine_exits_2_for_a_backend_it_cannot_build():
    done = _plan("hip")
    assert done.returncode == 2 and "hipcc" in done.stderr and done.stdout == ""
    done = _plan("cpu")
    assert done.returncode == 0 and "BACKEND=cpu" in done.stdout
    assert "-DGGML_NATIVE=OFF" in done.stdout


def test_setup_rebuilds_only_when_the_backend_changes(tmp_path):
    """The venv's pip is mocked (``tests/fake_venv.py``): a CUDA build takes many
    minutes and a GPU machine's toolkit."""
    from tests.fake_venv import fake_venv
    from vllmchat.core.machine.detect import find_nvcc

    log = tmp_path / "log"
    env = {**os.environ, **fake_venv(tmp_path)}
    env.pop("CMAKE_ARGS", None)

    def setup(backend: str) -> list[str]:
        before = log.read_text().splitlines() if log.exists() else []
        done = subprocess.run(
            ["bash", "scripts/setup.sh", "llama"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**env, "VLLMCHAT_BACKEND": backend},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return log.read_text().splitlines()[len(before) :] if log.exists() else []

    first = setup("cpu")
    assert first == ["wheel CMAKE_ARGS=-DGGML_NATIVE=OFF -DLLAVA_BUILD=ON CUDACXX=", "install"]
    assert setup("cpu") == []  # the stamp matches: nothing is rebuilt or reinstalled
    if find_nvcc() is None:
        pytest.skip("no CUDA toolkit on this machine for the backend switch")
    cuda = setup("cuda")
    assert cuda[0].startswith("wheel CMAKE_ARGS=-DGGML_CUDA=on -DGGML_NATIVE=OFF")
    assert "CUDACXX=/" in cuda[0] and cuda[1:] == ["install"]
    assert setup("cuda") == []
    assert setup("cpu") == ["install"]  # back to the cached CPU wheel, no rebuild
