"""Tuning as the front ends run it: cached results reused, new ones stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vllmchat.core.engine.protocol import MeasuredEngine
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.description import ModelDescription, describe
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings
from vllmchat.core.tuning.cache import TuneCache
from vllmchat.core.tuning.events import TuneEvent, TuneFinished, TuneStarted
from vllmchat.core.tuning.tuner import TuneRequest, tune


def describe_file(path: str) -> ModelDescription | None:
    try:
        return describe(read_header(path))
    except (OSError, ValueError, KeyError):
        return None


def run_tune(
    engine: MeasuredEngine,
    settings: LoadSettings,
    budget_s: float = 60.0,
    *,
    fresh: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    cache: TuneCache | None = None,
    request: TuneRequest | None = None,
    restore: bool = True,
    margin_mib: int = GPU_MARGIN_MIB,
) -> Iterator[TuneEvent]:
    """The cached result for this file, device, settings and margin (``margin_mib``:
    the device memory kept free, at least), or a new sweep (stored)."""
    cache = cache or TuneCache()
    hw = engine.probe()
    req = request or TuneRequest(base=settings, budget_s=budget_s, margin_mib=margin_mib)
    if not fresh:
        cached = cache.get(settings, hw, req.margin_mib)
        if cached is not None:
            yield TuneStarted(0, budget_s, cached.device)
            yield TuneFinished(cached)
            return
    desc = describe_file(settings.model_path)
    for event in tune(engine, req, hw, desc, should_stop=should_stop, restore=restore):
        if isinstance(event, TuneFinished):
            cache.put(settings, hw, event.result, req.margin_mib)
        yield event
