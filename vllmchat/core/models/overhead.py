"""The GPU runtime's own memory, learned per device and backend from real loads.

llama.cpp's buffer sums miss what the GPU runtime itself holds (CUDA context,
cuBLAS workspace, allocator slack). After a load, the device memory the engine
process really uses minus the estimate without that allowance is the overhead
of this device; it is stored per device and backend and used by the next
estimates instead of a constant.
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


def learned_overhead(hw: HardwareInfo) -> int:
    """The overhead measured on this device (same backend first), else the default."""
    key = device_key(hw)
    if key is None:
        return GPU_RUNTIME_OVERHEAD
    known = _read()
    if key in known:
        return known[key]
    gpu = key.split("|", 1)[1]
    same_gpu = [v for k, v in known.items() if k.split("|", 1)[-1] == gpu]
    return same_gpu[-1] if same_gpu else GPU_RUNTIME_OVERHEAD


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
