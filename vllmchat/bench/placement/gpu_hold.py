"""Another process holding all but N GiB of each GPU: what a laptop card, or a card a
desktop shares, leaves the app. Plain device allocations through the CUDA driver
(``libcuda.so.1``, present wherever an NVIDIA driver is), no framework, no network.

``with hold_all_but(6.0) as held: ...`` starts ``python -m vllmchat.bench.placement.gpu_hold
6.0``; the child allocates until each device has 6 GiB free, says so on stdout and
keeps the memory until its stdin closes (when the benchmark ends, or dies).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

_GIB, _MIB = 1 << 30, 1 << 20


class HoldError(RuntimeError):
    """The memory could not be held (no NVIDIA driver, or the driver refused)."""


class _Cuda:
    """The few driver calls needed, each checked."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check(self.lib.cuInit(0), "cuInit")

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with CUDA driver error {status}")

    def count(self) -> int:
        n = ctypes.c_int()
        self.check(self.lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        return n.value

    def use(self, ordinal: int) -> None:
        """Make ``ordinal``'s primary context current (kept until the process ends)."""
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def mem_info(self) -> tuple[int, int]:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        status = self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
        self.check(status, "cuMemGetInfo")
        return free.value, total.value

    def alloc(self, size: int) -> bool:
        ptr = ctypes.c_ulonglong()
        return int(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))) == 0


def take(cuda: _Cuda, leave: int) -> dict[str, int]:
    """Allocate on the current device until ``leave`` bytes are free (to 2 MiB)."""
    held = 0
    while True:
        free, total = cuda.mem_info()
        excess = free - leave
        size = next((s for s in (_GIB, 64 * _MIB, 2 * _MIB) if excess >= s and cuda.alloc(s)), 0)
        if not size:
            return {"free_mib": free // _MIB, "total_mib": total // _MIB, "held_mib": held // _MIB}
        held += size


def main() -> None:
    """``python -m vllmchat.bench.placement.gpu_hold FREE_GIB``: hold, report one JSON line,
    wait."""
    leave = int(float(sys.argv[1]) * _GIB)
    try:
        cuda = _Cuda()
        devices = []
        for i in range(cuda.count()):
            cuda.use(i)
            devices.append(take(cuda, leave))
    except (OSError, RuntimeError) as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return
    print(json.dumps({"devices": devices}), flush=True)
    sys.stdin.read()  # until the benchmark closes the pipe (or ends)


@contextlib.contextmanager
def hold_all_but(free_gib: float) -> Iterator[dict[str, Any]]:
    """Another process holds all but ``free_gib`` GiB of every GPU while inside."""
    command = [sys.executable, "-m", "vllmchat.bench.placement.gpu_hold", str(free_gib)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        report: dict[str, Any] = json.loads(line) if line.strip() else {"error": "no report"}
        if "error" in report:
            raise HoldError(f"could not hold GPU memory: {report['error']}")
        yield report
    finally:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
