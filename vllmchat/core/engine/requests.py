"""What crosses the pipe between ``EngineClient`` and the engine process, as typed
values: a request per operation, wrapped in a ``Call`` with its id; a ``Reply`` or
a ``Failure``; a turn's events in ``TurnEvent``. Streamed tokens are the one
exception: they cross as the plain tuples ``("tok", rid, text, id)`` and
``("toks", rid, [(text, id), …])``, the hot path of decoding (a tuple pickles
several times faster than a dataclass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from vllmchat.core.engine.info import ScoreRequest
from vllmchat.core.settings import LoadSettings, SamplingSettings


@dataclass(frozen=True)
class Request:
    """An operation of the engine process; ``stoppable`` ones end early on ``Stop``."""

    stoppable: ClassVar[bool] = False


@dataclass(frozen=True)
class Ping(Request):
    pass


@dataclass(frozen=True)
class Load(Request):
    settings: LoadSettings


@dataclass(frozen=True)
class Reload(Request):
    settings: LoadSettings


@dataclass(frozen=True)
class ExportState(Request):
    path: str


@dataclass(frozen=True)
class Checkpoint(Request):
    path: str


@dataclass(frozen=True)
class ImportState(Request):
    path: str


@dataclass(frozen=True)
class RememberReplies(Request):
    pairs: Sequence[tuple[str, Sequence[int]]]


@dataclass(frozen=True)
class Probe(Request):
    pass


@dataclass(frozen=True)
class Memory(Request):
    pass


@dataclass(frozen=True)
class SetThreads(Request):
    n_threads: int
    n_threads_batch: int


@dataclass(frozen=True)
class Measure(Request):
    stoppable: ClassVar[bool] = True
    prompt_tokens: int
    decode_tokens: int


@dataclass(frozen=True)
class Score(Request):
    stoppable: ClassVar[bool] = True
    request: ScoreRequest


@dataclass(frozen=True)
class Quantize(Request):
    source: str
    target: str
    ftype: str
    n_threads: int


@dataclass(frozen=True)
class Kv(Request):
    pass


@dataclass(frozen=True)
class Tokenize(Request):
    text: str


@dataclass(frozen=True)
class ControlTokens(Request):
    ids: Sequence[int]


@dataclass(frozen=True)
class Render(Request):
    messages: Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class Crash(Request):
    how: str


@dataclass(frozen=True)
class Chat(Request):
    messages: Sequence[Mapping[str, str]]
    sampling: SamplingSettings


@dataclass(frozen=True)
class Call:
    """A request and its id (replies and events carry the id back)."""

    rid: int
    request: Request


@dataclass(frozen=True)
class Stop:
    """End the call ``rid`` (a turn, a measurement) within a token."""

    rid: int


@dataclass(frozen=True)
class Exit:
    """End the engine process after what it is doing."""


@dataclass(frozen=True)
class Reply:
    rid: int
    value: Any


@dataclass(frozen=True)
class Failure:
    rid: int
    error: Exception


@dataclass(frozen=True)
class TurnEvent:
    """An event of a turn other than a token."""

    rid: int
    event: Any
