"""The engine interface the application layer depends on.

``EngineClient`` (llama.cpp in a child process) implements it; a second engine
(a remote server) plugs in by implementing the same methods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from vllmchat.core.engine.events import Event
from vllmchat.core.engine.info import KvUsage, ModelInfo, ReloadResult, StateTransfer
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.settings import LoadSettings, SamplingSettings


class Engine(Protocol):
    """Load a model, stream replies, move its KV state, survive and report its death."""

    settings: LoadSettings | None
    info: ModelInfo | None

    @property
    def alive(self) -> bool: ...

    def exit_reason(self) -> str | None:
        """How the engine ended when it is no longer running (None while it runs)."""
        ...

    def load(self, settings: LoadSettings) -> ModelInfo: ...

    def reload(self, settings: LoadSettings) -> ReloadResult: ...

    def restart(self) -> ModelInfo | None: ...

    def close(self) -> None: ...

    def chat(
        self, messages: Sequence[Mapping[str, str]], sampling: SamplingSettings | None = None
    ) -> Iterator[Event]: ...

    def stop(self) -> None: ...

    def render(self, messages: Sequence[Mapping[str, str]]) -> list[int]: ...

    def tokenize(self, text: str) -> list[int]: ...

    def remember_replies(self, replies: Sequence[tuple[str, Sequence[int]]]) -> None: ...

    def kv(self) -> KvUsage: ...

    def export_state(self, path: str) -> StateTransfer: ...

    def checkpoint(self, path: str) -> StateTransfer: ...

    def import_state(self, path: str) -> StateTransfer: ...

    def probe(self) -> HardwareInfo: ...
