"""The llama.cpp engine: a child process, and the client that talks to it."""

from vllmchat.core.engine.client import EngineClient
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    Event,
    PrefillProgressEvent,
    StatsEvent,
    TokenEvent,
    TurnStats,
)

__all__ = [
    "DoneEvent",
    "EngineClient",
    "EngineError",
    "ErrorEvent",
    "ErrorKind",
    "Event",
    "PrefillProgressEvent",
    "StatsEvent",
    "TokenEvent",
    "TurnStats",
]
