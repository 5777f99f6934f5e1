"""The engine interface the application layer depends on.

``EngineClient`` (llama.cpp in a child process) implements it; a second engine
(a remote server) plugs in by implementing the same methods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, cast

from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import Event
from vllmchat.core.engine.info import (
    KvUsage,
    ModelInfo,
    ProcessMemory,
    ReloadResult,
    StateTransfer,
)
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.settings import LoadSettings, SamplingSettings


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do beyond chatting; callers ask for these, not for a class."""

    local_memory: bool = False  # its process's RAM and VRAM can be read (memory panel)
    offload: bool = False  # GPU layers and expert placement are set here (slider, estimate)
    tuning: bool = False  # it measures speed and memory and changes threads live
    kv_files: bool = False  # its KV state is written to and read from files here
    prompt_cache: bool = False  # a prompt prefilled ahead (max_tokens 0) is reused next turn
    vision: bool = False  # the model loaded takes images (it has a projector)
    api_slots: bool = False  # API turns run in slots of their own, their KV states kept by key
    lends_cores: bool = False  # its decode lends one of this machine's cores between tokens


LOCAL = Capabilities(
    local_memory=True,
    offload=True,
    tuning=True,
    kv_files=True,
    prompt_cache=True,
    api_slots=True,
    lends_cores=True,
)


class Engine(Protocol):
    """Load a model, stream replies, move its KV state, survive and report its death."""

    @property
    def capabilities(self) -> Capabilities:
        """What this engine can do now (``vision`` follows the model loaded)."""
        ...

    @property
    def info(self) -> ModelInfo | None:
        """The model loaded (None before a load and after a failed one). The settings it
        was loaded with belong to the caller (the application layer owns them)."""
        ...

    @property
    def pid(self) -> int | None:
        """The engine's process on this machine (None when the model runs elsewhere)."""
        ...

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
        self,
        messages: Sequence[Mapping[str, str]],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = PLAIN,
    ) -> Iterator[Event]:
        """Stream the reply to the last message. ``options.images``: one per
        ``MEDIA_MARKER`` in the messages' texts, in order (``images.py``); an engine
        without ``Capabilities.vision`` answers them with an ``ErrorKind.NO_VISION``
        error. ``options.tools`` offers tools; ``json_schema`` or ``grammar`` constrains
        the reply."""
        ...

    def stop(self) -> None: ...

    def render(self, messages: Sequence[Mapping[str, str]]) -> list[int]: ...

    def tokenize(self, text: str) -> list[int]: ...

    def remember_replies(self, replies: Sequence[tuple[str, Sequence[int]]]) -> None: ...

    def kv(self) -> KvUsage: ...

    def export_state(self, path: str) -> StateTransfer: ...

    def import_state(self, path: str) -> StateTransfer: ...

    def probe(self) -> HardwareInfo: ...


class MeasuredEngine(Engine, Protocol):
    """An engine with ``Capabilities.tuning``: it measures itself."""

    def memory(self) -> ProcessMemory: ...

    def measure(self, prompt_tokens: int = 512, decode_tokens: int = 64) -> Any: ...

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None: ...

    def start(self) -> None:
        """A fresh engine process (after a failed allocation may have left memory held)."""
        ...


def measured(engine: Engine) -> MeasuredEngine | None:
    """``engine`` as one that measures itself, when its capabilities say it does."""
    return cast(MeasuredEngine, engine) if engine.capabilities.tuning else None


class CoreLender(Protocol):
    """An engine whose decode lends a CPU core for a moment (``core_turns``)."""

    def lend_cores(self) -> AbstractContextManager[bool]:
        """A core for the work within (True: the decode lent it)."""
        ...


def core_lender(engine: Engine) -> CoreLender | None:
    """``engine`` as one that lends its cores, when its capabilities say it does."""
    return cast(CoreLender, engine) if engine.capabilities.lends_cores else None
