"""Placing a loaded model anew: the room a reload finds, the estimate's bound, and the
words for a placement that had to be taken back."""

from __future__ import annotations

import contextlib
import re
from dataclasses import replace

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import Engine, measured
from vllmchat.core.models.advisor import check_fit
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.models.overhead import learn_overhead, learned_overhead
from vllmchat.core.placement import Placement
from vllmchat.core.settings import LoadSettings

# How an engine ends when a placement asks more of a device than it has.
ABORTS = frozenset({ErrorKind.ENGINE_DIED, ErrorKind.OOM_LOAD, ErrorKind.OOM_GENERATE})
_DEVICE = re.compile(r"^[A-Za-z]+(\d+)$")  # "CUDA0", "Vulkan1", "ROCm0" (not "CUDA_Host")


def room_for_placing(hw: HardwareInfo, held_mib: dict[str, float]) -> HardwareInfo:
    """The machine as a reload of the loaded model finds it: each GPU's free memory
    (read with the model loaded) plus what the model holds there now, and the GPU
    runtime's own share, which the estimate counts again (``held_mib``: llama.cpp's
    buffer sums by ``kind:device``)."""
    held = [0.0] * len(hw.gpus)
    for key, mib in held_mib.items():
        match = _DEVICE.match(key.split(":")[-1])
        if match and int(match.group(1)) < len(held):
            held[int(match.group(1))] += mib
    if not any(held):
        return hw
    overhead = learned_overhead(hw)
    gpus = [
        replace(g, free=g.free + int(h * MIB) + overhead) if h else g
        for g, h in zip(hw.gpus, held, strict=True)
    ]
    return replace(hw, gpus=gpus)


def past_bound(desc: ModelDescription | None, room: HardwareInfo | None, s: AppSettings) -> str:
    """Why ``s`` is at or past the estimate's bound on this machine ("" when it fits,
    or when the model or the machine is not known)."""
    if desc is None or room is None:
        return ""
    fit = check_fit(desc, room, s.fit_settings(learned_overhead(room)))
    return "" if fit.fits else fit.message


def fell_back(failed: Placement, restored: Placement, reason: str) -> str:
    """The message for a placement taken back after the engine ended."""
    return (
        f"{reason.rstrip('.')}, at {failed.label()}. The engine runs again at "
        f"{restored.label()}, the last placement that ran; the conversation is kept."
    )


def learn_from_load(
    engine: Engine, hw: HardwareInfo, desc: ModelDescription | None, load: LoadSettings
) -> None:
    """After a GPU load: the process's real device memory teaches the estimator this
    device's runtime overhead (used by every later estimate, and by the bound)."""
    measuring = measured(engine)
    if measuring is None or not hw.gpu_offload or desc is None or not load.placement.uses_gpu:
        return
    with contextlib.suppress(EngineError):
        vram = measuring.memory().vram
        if vram is not None:
            overhead = learned_overhead(hw)
            fit = FitSettings.of(load, overhead=overhead)
            learn_overhead(hw, vram, estimate(desc, fit).vram, overhead)
