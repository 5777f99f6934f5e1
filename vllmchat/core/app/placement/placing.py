"""Placing a loaded model anew: the room a reload finds, the estimate of a proposed
placement (made once, and published with its event), the sliders' bounds, and the
words for a placement that had to be taken back."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import replace

from vllmchat.core.app.events import PlacementProposed, SliderBounds
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import Engine, measured
from vllmchat.core.models.advisor import Fit, check_fit
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.models.overhead import learn_overhead, learned_overhead
from vllmchat.core.placement import Placement, all_layers
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


Estimator = Callable[[ModelDescription, HardwareInfo, FitSettings], Fit]
"""How a placement fits a machine (``check_fit``; tests give one that counts)."""


class PlacementEstimates:
    """The estimates behind the offload sliders: one per proposed placement, published
    with it, and reused when that placement is asked for; the sliders' bounds once per
    placement that runs. ``propose`` may be called on any thread: it changes nothing
    but the last answer it keeps, one value."""

    def __init__(self, estimator: Estimator | None = None) -> None:
        self.estimator: Estimator = estimator or check_fit
        self._last: tuple[object, object, FitSettings, PlacementProposed] | None = None
        self._bounds: tuple[object, object, FitSettings, SliderBounds] | None = None

    def propose(
        self,
        desc: ModelDescription | None,
        room: HardwareInfo | None,
        s: AppSettings,
        placement: Placement,
    ) -> PlacementProposed:
        """The estimate of ``placement`` with the rest of ``s`` (the settings that run)."""
        if desc is None or room is None:
            return PlacementProposed(placement, None, room, SliderBounds())
        return self.propose_fit(desc, room, s.fit_settings(learned_overhead(room)), placement)

    def propose_fit(
        self,
        desc: ModelDescription,
        room: HardwareInfo,
        running: FitSettings,
        placement: Placement,
    ) -> PlacementProposed:
        """The estimate of ``placement`` with the rest of ``running``, the memory-relevant
        settings that run."""
        bounds = self._bounds_at(desc, room, running)
        fit = self.estimator(desc, room, running.with_placement(placement))
        proposed = PlacementProposed(placement, fit, room, bounds)
        self._last = (desc, room, running, proposed)
        return proposed

    def past_bound(
        self, desc: ModelDescription | None, room: HardwareInfo | None, s: AppSettings
    ) -> str:
        """Why ``s`` is at or past the estimate's bound on this machine ("" when it fits,
        or when the model or the machine is not known); the proposal's estimate when
        ``s`` is what was proposed."""
        if desc is None or room is None:
            return ""
        last, fit_settings = self._last, s.fit_settings(learned_overhead(room))
        if last is not None and last[0] is desc and last[1] is room:
            proposed = last[3]
            if last[2].with_placement(proposed.placement) == fit_settings:
                return proposed.past_bound
        fit = self.estimator(desc, room, fit_settings)
        return "" if fit.fits else fit.message

    def _bounds_at(
        self, desc: ModelDescription, room: HardwareInfo, running: FitSettings
    ) -> SliderBounds:
        known = self._bounds
        if known is not None and known[0] is desc and known[1] is room and known[2] == running:
            return known[3]
        bounds = slider_bounds(desc, room, running, self.estimator)
        self._bounds = (desc, room, running, bounds)
        return bounds


def slider_bounds(
    desc: ModelDescription, room: HardwareInfo, running: FitSettings, estimator: Estimator
) -> SliderBounds:
    """The first position of each slider at or past the estimate's bound, the other
    slider held where ``running`` places the weights."""
    if not room.gpu_offload:
        return SliderBounds()
    at, n = running.placement, desc.n_layer

    def fits(p: Placement) -> bool:
        return estimator(desc, room, running.with_placement(p)).fits

    layers = _first_past(all_layers(n), lambda v: fits(replace(at, n_gpu_layers=v)))
    experts = None
    if desc.is_moe:
        experts = _first_past(n, lambda g: fits(at.with_expert_layers_on_gpu(g, n)))
    return SliderBounds(layers, experts)


def _first_past(top: int, fits: Callable[[int], bool]) -> int | None:
    """The first of ``0..top`` where ``fits`` fails (it holds up to a point), or None."""
    if fits(top):
        return None
    lo, hi = 0, top  # fits fails at hi
    if not fits(lo):
        return 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return hi


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
