"""The GPU runtime's own memory: read at the probe, then learned per device from real loads.

llama.cpp's buffer sums miss what the GPU runtime itself holds. Measured on an H200
(CUDA 13, NVML per process) for 1B and 4B shapes in Q4_K_M, Q8_0 and F16 at 4k and
32k of context: the process held 518 MiB once the runtime had started (its context),
522-524 MiB beyond llama.cpp's buffers after the load, and 600-605 MiB after the
first turn with quantized weights (the kernels that turn loads and the pool of
temporary buffers), 695-718 MiB with F16 weights (cuBLAS and its workspace besides).

Before any load, the overhead is the probe's reading of the context plus what a first
turn adds; after a load, the device memory the engine process really uses minus the
estimate without that allowance is this device's overhead, stored per device and
backend and used by the next estimates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import GPU_RUNTIME_OVERHEAD, MIB
from vllmchat.core.paths import measurements_dir

_MIN, _MAX = 0, 8192 * MIB  # a figure outside this is a bad measurement, not an overhead


def _path() -> Path:
    return measurements_dir() / "gpu-overhead.json"


def device_key(hw: HardwareInfo) -> str | None:
    """``backend|device`` of the first GPU (backend left empty when unknown)."""
    if not hw.gpus:
        return None
    gpu = hw.gpus[0].name
    backend = next((b.name for b in hw.backends if b.name.upper() != "CPU" and b.devices), "")
    return f"{backend}|{gpu}"


def _read() -> dict[str, int]:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


# What a first turn adds to the runtime's context on a CUDA device (quantized weights:
# the kernels it loads and the temporary buffers' pool; 78-87 MiB measured on an H200).
FIRST_TURN_RUNTIME = 82 * MIB


def first_overhead(hw: HardwareInfo) -> int:
    """The overhead before this device has seen a load: the runtime's context as the
    probe read it, plus what a first turn adds; the default where it read nothing."""
    if hw.runtime_context > 0:
        return hw.runtime_context + FIRST_TURN_RUNTIME
    return GPU_RUNTIME_OVERHEAD


def learned_overhead(hw: HardwareInfo) -> int:
    """The overhead measured on this device (same backend first), else the first one."""
    key = device_key(hw)
    if key is None:
        return first_overhead(hw)
    known = _read()
    if key in known:
        return known[key]
    gpu = key.split("|", 1)[1]
    same_gpu = [v for k, v in known.items() if k.split("|", 1)[-1] == gpu]
    return same_gpu[-1] if same_gpu else first_overhead(hw)


def learn_overhead(hw: HardwareInfo, measured: int, estimated: int, allowance: int) -> None:
    """Remember this device's overhead: the ``measured`` device memory of the engine
    process minus an ``estimated`` figure made with ``allowance`` for the overhead."""
    overhead = measured - (estimated - allowance)
    key = device_key(hw)
    if key is None or not _MIN <= overhead <= _MAX:
        return
    known = _read()
    known[key] = int(overhead)
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only means the default is used next time
