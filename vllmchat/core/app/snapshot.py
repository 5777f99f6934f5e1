"""What a front end on another thread may know of the application layer: a frozen
snapshot, made on the thread that owns the engine, instead of reaching into it."""

from __future__ import annotations

from dataclasses import dataclass

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.protocol import Capabilities
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo


@dataclass(frozen=True)
class AppSnapshot:
    """The settings, the engine's capabilities and state, the model and the machine."""

    settings: AppSettings
    capabilities: Capabilities
    alive: bool = False  # the engine runs (a model may or may not be loaded)
    pid: int | None = None  # the engine's process on this machine
    info: ModelInfo | None = None  # the loaded model (None: none loaded)
    hardware: HardwareInfo | None = None  # as the engine's process saw it at the last load
    room: HardwareInfo | None = None  # as a new placement of the loaded model would find it
    description: ModelDescription | None = None  # the GGUF's layers, for estimates

    @property
    def loaded(self) -> bool:
        """A model is loaded and its engine runs."""
        return self.alive and self.info is not None
