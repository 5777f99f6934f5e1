"""The set-up's plan for each platform: backend, flags, library names, folders, exactness.

Windows and macOS are planned here from injected facts (no such machine runs these
tests); the Linux plan for this machine is the detected one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmchat.core.machine.backend import MachineFacts, choose_backend, rebuild_advice
from vllmchat.setup.cli import main
from vllmchat.setup.plan import make_plan
from vllmchat.setup.targets import PLATFORMS

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    # platform: backend, a flag it must carry, ggml's file name, exact verify
    "linux-cpu": ("cpu", "-DGGML_NATIVE=OFF", "libggml.so", True),
    "linux-cuda": ("cuda", "-DCMAKE_CUDA_ARCHITECTURES=89", "libggml.so", True),
    "windows-cuda": ("cuda", "-DGGML_CUDA=on", "ggml.dll", True),
    "windows-vulkan": ("vulkan", "-DGGML_VULKAN=on", "ggml.dll", False),
    "windows-cpu": ("cpu", "-DGGML_NATIVE=OFF", "ggml.dll", True),
    "macos-arm64": ("metal", "-DGGML_NATIVE=OFF", "libggml.dylib", False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_platform_plans_its_backend_and_library_names(name, capsys):
    backend, flag, ggml, exact = EXPECTED[name]
    assert main(["--plan", "--json", "--platform", name]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["backend"] == backend and flag in plan["cmake_args"]
    assert plan["libraries"]["ggml"][0] == ggml
    assert plan["libraries"]["llama"][0] == ggml.replace("ggml", "llama")
    assert plan["exact_verify"] is exact
    assert plan["exact_verify_reason"] == ("" if exact else plan["exact_verify_reason"])
    assert set(plan["folders"]) == {"data", "cache", "config", "log", "models", "wheels"}
    assert "-DGGML_NATIVE=ON" not in plan["cmake_args"]


def test_folders_follow_each_os_convention(capsys):
    def folders(name: str) -> dict[str, str]:
        main(["--json", "--platform", name])
        return json.loads(capsys.readouterr().out)["folders"]

    win = folders("windows-cpu")
    assert win["data"] == "%LOCALAPPDATA%\\vllmchat\\vllmchat"
    assert win["cache"] == "%LOCALAPPDATA%\\vllmchat\\vllmchat\\Cache"
    assert win["log"] == "%LOCALAPPDATA%\\vllmchat\\vllmchat\\Logs"
    mac = folders("macos-arm64")
    assert mac["data"] == "~/Library/Application Support/vllmchat"
    assert mac["cache"] == "~/Library/Caches/vllmchat" and mac["log"] == "~/Library/Logs/vllmchat"
    linux = folders("linux-cpu")
    assert linux["data"] == "~/.local/share/vllmchat" and linux["config"] == "~/.config/vllmchat"
    assert linux["wheels"] == "~/.cache/vllmchat/wheels"


def test_metal_says_why_its_verifies_are_not_exact():
    exact, why = make_plan(PLATFORMS["macos-arm64"]).exact_verify()
    assert not exact and "Metal" in why and "not batch-invariant" in why


def test_windows_takes_cuda_then_the_vulkan_sdk_then_the_cpu():
    gpu = ("NVIDIA GeForce RTX 3060",)
    sdk = {"vulkan_headers": True, "glslc": r"C:\VulkanSDK\Bin\glslc.exe"}
    no_toolkit = choose_backend(MachineFacts(system="windows", nvidia_gpus=gpu, **sdk))
    assert no_toolkit.backend == "vulkan"
    assert any("CUDA Toolkit for Windows" in n for n in no_toolkit.notes)
    bare = choose_backend(MachineFacts(system="windows", nvidia_gpus=gpu))
    assert bare.backend == "cpu" and any("Vulkan SDK" in n for n in bare.notes)
    toolkit_only = choose_backend(MachineFacts(system="windows", nvcc=r"C:\cuda\nvcc.exe"))
    assert toolkit_only.backend == "cpu"
    assert any("no NVIDIA GPU" in n and "nvidia-smi" in n for n in toolkit_only.notes)
    advice = rebuild_advice(MachineFacts(system="windows", nvidia_gpus=gpu))
    assert advice.endswith('$env:VLLMCHAT_BACKEND="cuda"; scripts\\setup.ps1')


def test_a_toolkit_without_a_gpu_and_a_gpu_without_a_toolkit_name_the_fix_on_linux():
    toolkit = choose_backend(MachineFacts(nvcc="/usr/local/cuda/bin/nvcc"))
    assert toolkit.backend == "cpu" and any("NVIDIA driver" in n for n in toolkit.notes)
    gpu = choose_backend(MachineFacts(nvidia_gpus=("RTX 4060",)))
    assert any("nvidia-cuda-toolkit" in n for n in gpu.notes)
    forced = choose_backend(MachineFacts(nvcc="/usr/local/cuda/bin/nvcc"), "cuda")
    assert forced.backend == "cuda" and any("no NVIDIA GPU" in n for n in forced.notes)


def test_a_cpu_build_on_macos_turns_metal_off():
    intel = choose_backend(MachineFacts(system="darwin", machine="x86_64"))
    forced = choose_backend(MachineFacts(system="darwin", machine="arm64"), "cpu")
    for choice in (intel, forced):
        assert choice.backend == "cpu" and "-DGGML_METAL=OFF" in choice.cmake_args


def test_a_forced_backend_that_cannot_be_built_exits_2_with_the_fix(capsys, monkeypatch):
    monkeypatch.setenv("VLLMCHAT_BACKEND", "cuda")
    assert main(["--plan", "--platform", "windows-cpu"]) == 2
    assert "CUDA Toolkit for Windows" in capsys.readouterr().out


@pytest.mark.parametrize("version", ["2.7.18", "3.8.18", "3.9.18"])
def test_an_old_python_is_refused_with_what_to_install(version):
    old = Path(f"/root/.pyenv/versions/{version}/bin/python")
    if not old.exists():
        pytest.skip(f"no Python {version} on this machine")
    done = subprocess.run(
        [str(old), "-m", "vllmchat.setup", "--plan"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"is Python {version}" in done.stderr and "Python 3.10 or newer" in done.stderr


def test_the_plan_runs_from_a_folder_with_spaces_and_accents(tmp_path):
    checkout = tmp_path / "Mes modèles" / "vllm chat ü"
    shutil.copytree(
        ROOT / "vllmchat", checkout / "vllmchat", ignore=shutil.ignore_patterns("__pycache__")
    )
    done = subprocess.run(
        [sys.executable, "-m", "vllmchat.setup", "--plan", "--json"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["libraries"]["ggml"][0] == "libggml.so"
