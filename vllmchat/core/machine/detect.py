"""Read the facts backend selection needs off this machine (no llama.cpp, no Qt)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from vllmchat.core.machine.backend import MachineFacts

_NVIDIA, _AMD = "0x10de", "0x1002"


def _run(*cmd: str, timeout: float = 10) -> str:
    """A command's stdout, or "" when it is missing or fails."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def find_nvcc(env: dict[str, str] | None = None) -> str | None:
    """nvcc from CUDACXX, CUDA_HOME/CUDA_PATH, PATH, or /usr/local/cuda."""
    env = dict(os.environ) if env is None else env
    exe = "nvcc.exe" if os.name == "nt" else "nvcc"
    candidates = [env.get("CUDACXX", "")]
    candidates += [
        str(Path(env[k]) / "bin" / exe) for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k)
    ]
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def find_hipcc(env: dict[str, str] | None = None) -> str | None:
    env = dict(os.environ) if env is None else env
    candidates = [shutil.which("hipcc") or ""]
    candidates += [str(Path(env["ROCM_PATH"]) / "bin" / "hipcc")] if env.get("ROCM_PATH") else []
    candidates.append("/opt/rocm/bin/hipcc")
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def pci_display_vendors(sys_root: Path = Path("/sys")) -> list[str]:
    """PCI vendor ids of the display devices (class 0x03xxxx) the kernel sees."""
    vendors = []
    for dev in sorted((sys_root / "bus" / "pci" / "devices").glob("*")):
        try:
            if (dev / "class").read_text().strip().startswith("0x03"):
                vendors.append((dev / "vendor").read_text().strip().lower())
        except OSError:
            continue
    return vendors


def nvidia_gpus() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Names and compute capabilities from nvidia-smi (empty without a working driver)."""
    out = _run("nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader")
    names, caps = [], []
    for line in out.splitlines():
        name, _, cap = line.partition(",")
        if name.strip():
            names.append(name.strip())
            caps.append(cap.strip())
    return tuple(names), tuple(c for c in caps if re.fullmatch(r"\d+\.\d+", c))


def _amd_gfx_targets() -> tuple[str, ...]:
    """The AMD GPUs' gfx targets from rocminfo (e.g. gfx1100)."""
    return tuple(sorted(set(re.findall(r"\bgfx[0-9a-f]{3,4}\b", _run("rocminfo")))))


def _vulkan_headers(env: dict[str, str]) -> bool:
    roots = [Path("/usr/include"), Path("/usr/local/include")]
    if env.get("VULKAN_SDK"):  # LunarG's SDK: Include\ on Windows, include/ elsewhere
        sdk = Path(env["VULKAN_SDK"])
        roots[:0] = [sdk / "include", sdk / "Include"]
    return any((r / "vulkan" / "vulkan.h").exists() for r in roots)


def _glslc(env: dict[str, str]) -> str | None:
    """glslc on PATH, or in the Vulkan SDK's Bin folder (where LunarG's installer puts it)."""
    found = shutil.which("glslc")
    if found or not env.get("VULKAN_SDK"):
        return found
    sdk = Path(env["VULKAN_SDK"])
    names = ("Bin/glslc.exe", "bin/glslc.exe", "bin/glslc", "Bin/glslc")
    return next((str(sdk / n) for n in names if (sdk / n).is_file()), None)


def detect_machine(env: dict[str, str] | None = None) -> MachineFacts:
    """The facts of this machine that decide the llama.cpp backend."""
    env = dict(os.environ) if env is None else env
    system = platform.system().lower()
    names, caps = nvidia_gpus()
    vendors = pci_display_vendors() if system == "linux" else []
    if not names and _NVIDIA in vendors:
        names = ("NVIDIA GPU (no working driver: nvidia-smi failed)",)
    hipcc = find_hipcc(env)
    amd = vendors.count(_AMD) or (1 if Path("/dev/kfd").exists() else 0)
    gfx = _amd_gfx_targets() if hipcc else ()
    other = sum(1 for v in vendors if v not in (_NVIDIA, _AMD))
    if not vendors and system == "linux" and not names and not amd:
        other = len(list(Path("/dev/dri").glob("renderD*")))
    return MachineFacts(
        system=system,
        machine=platform.machine().lower(),
        nvidia_gpus=names,
        nvidia_compute_caps=caps,
        nvcc=find_nvcc(env),
        amd_gpus=amd,
        hipcc=hipcc,
        amd_gfx=gfx,
        other_gpus=other,
        vulkan_headers=_vulkan_headers(env),
        glslc=_glslc(env),
        apt_as_root=hasattr(os, "getuid") and os.getuid() == 0 and bool(shutil.which("apt-get")),
    )


def driver_cuda_version() -> str | None:
    """The newest CUDA version the installed NVIDIA driver supports (nvidia-smi's header)."""
    m = re.search(r"CUDA Version:\s*(\d+\.\d+)", _run("nvidia-smi"))
    return m.group(1) if m else None


def nvcc_version(nvcc: str | None) -> str | None:
    """The CUDA toolkit's release, e.g. "12.4"."""
    m = re.search(r"release (\d+\.\d+)", _run(nvcc, "--version")) if nvcc else None
    return m.group(1) if m else None


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (Linux), e.g. avx2, avx512f, amx_int8."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return frozenset(m.group(1).split()) if m else frozenset()
