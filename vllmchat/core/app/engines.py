"""Where engines are made: the local llama.cpp process, or a server.

The front ends never construct an engine class: the chat's engine is the
application layer's own (``ChatApp``), and work beside the chat (the checks, the
tuner, the quant lab) asks here for an engine of its own (``work_engine``); callers
then ask an engine for its ``capabilities``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.engine.remote.servers import api_key

if TYPE_CHECKING:
    from vllmchat.core.engine.remote.engine import RemoteEngine


@dataclass(frozen=True)
class EngineSpec:
    """Which engine: the local one (no URL) or a server and, optionally, its model."""

    server_url: str = ""
    server_model: str = ""

    @classmethod
    def of(cls, settings: AppSettings) -> EngineSpec:
        return cls(settings.server_url, settings.server_model)

    @property
    def local(self) -> bool:
        return not self.server_url


def open_local(*, memory_limit: int | None = None) -> EngineClient:
    """The llama.cpp engine in a child process (started by its first load)."""
    return EngineClient(memory_limit=memory_limit)


def work_engine(*, memory_limit: int | None = None) -> EngineClient:
    """A llama.cpp engine of its own for work beside the chat (the checks, the tuner,
    the quant lab), so the chat's engine keeps its model: its process starts at its
    first load, and the caller closes it."""
    return open_local(memory_limit=memory_limit)


def open_server(
    url: str,
    model: str | None = None,
    *,
    key: str | None = None,
    n_ctx: int | None = None,
    timeout_s: float = 120.0,
) -> RemoteEngine:
    """An OpenAI-compatible server; ``key`` defaults to the one kept in the keyring."""
    key = key or api_key(url)
    from vllmchat.core.engine.remote.engine import RemoteEngine  # the SDK loads when used

    return RemoteEngine(url, model=model, api_key=key, n_ctx=n_ctx, timeout_s=timeout_s)


def open_engine(spec: EngineSpec) -> Engine:
    """The engine ``spec`` names."""
    if spec.local:
        return open_local()
    return open_server(spec.server_url, spec.server_model or None)


class SummaryServer:
    """The server that writes summaries, when the settings name one: connected at its
    first summary, and again only when its address or model change."""

    def __init__(self) -> None:
        self._engine: RemoteEngine | None = None
        self._key = ("", "")

    def engine(self, url: str, model: str) -> RemoteEngine | None:
        """The server at ``url`` (None when no address is set)."""
        if not url:
            self._engine = None
            return None
        if self._engine is None or self._key != (url, model):
            self._engine = open_server(url, model or None)
            self._key = (url, model)
        return self._engine
