"""Tuning as the front ends run it: cached results reused, new ones stored."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from typing import Protocol

from vllmchat.core.app.events import AppEvent
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.events import EngineError, ErrorEvent, ErrorKind
from vllmchat.core.engine.protocol import Engine, MeasuredEngine, measured
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.description import ModelDescription, describe
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings
from vllmchat.core.tuning.cache import TuneCache
from vllmchat.core.tuning.events import PointMeasured, TuneEvent, TuneFinished, TuneStarted
from vllmchat.core.tuning.results import TuneConfig
from vllmchat.core.tuning.tuner import TuneRequest, tune

_log = logging.getLogger(__name__)

NOT_LOCAL = "Tuning does not apply to a model on a server: the server owns its memory and threads."


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


def tune_loaded(
    engine: Engine,
    settings: AppSettings,
    budget_s: float,
    *,
    fresh: bool,
    should_stop: Callable[[], bool],
    before: Callable[[], None],
) -> Generator[TuneEvent | ErrorEvent, None, bool]:
    """Tune the model ``engine`` holds with ``settings`` (``before``: called once the
    engine is known to be local, ahead of the first load). Returns whether the model
    must be loaded back (a point was measured, or the engine holds no model)."""
    local = measured(engine)
    if local is None:
        yield ErrorEvent(ErrorKind.BAD_REQUEST, NOT_LOCAL)
        return False
    before()
    took_points = False
    try:
        for event in run_tune(
            local,
            settings.load,
            budget_s,
            fresh=fresh,
            should_stop=should_stop,
            restore=False,
            margin_mib=settings.gpu_margin_mib,
        ):
            took_points = took_points or isinstance(event, PointMeasured)
            yield event
    except EngineError as exc:
        _log.warning("Tuning failed: %s", exc, exc_info=exc)
        yield ErrorEvent(exc.kind, exc.message)
    return took_points or local.info is None


class Loader(Protocol):
    """Loads settings (``ChatApp.load``): live keeps the conversation's KV state."""

    def __call__(self, settings: AppSettings, *, live: bool = False) -> Iterator[AppEvent]: ...


class Tuning:
    """Measured tuning of the loaded model, given the app's engine, settings and loading
    (each read when an intent runs: a switch gives the app another engine)."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        settings: Callable[[], AppSettings],
        load: Loader,
        save_state: Callable[[], None],
    ) -> None:
        self._engine, self._settings = engine, settings
        self._load, self._save_state = load, save_state

    def tune(
        self, budget_s: float = 60.0, *, fresh: bool = False, should_stop: Callable[[], bool]
    ) -> Iterator[AppEvent | TuneEvent]:
        """Sweep GPU layers and threads for the loaded model (the cached result when
        there is one); then the model is loaded back with the conversation's KV state."""
        load_back = yield from tune_loaded(
            self._engine(),
            self._settings(),
            budget_s,
            fresh=fresh,
            should_stop=should_stop,
            before=self._save_state,
        )
        if load_back:
            yield from self._load(self._settings())  # with the reply ids and the KV state

    def apply_tune(self, config: TuneConfig) -> Iterator[AppEvent]:
        """Reload live with a tuning pick (the conversation's KV state kept)."""
        settings = self._settings()
        yield from self._load(replace(settings, load=config.apply_to(settings.load)), live=True)

    def stop_tune(self) -> None:
        """Stop the measurement in progress (any thread; within one token)."""
        self._engine().stop()
