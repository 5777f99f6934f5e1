"""What crosses the pipe between ``EngineClient`` and the engine process, as typed
values: a ``Request[ReplyT]`` per operation, wrapped in a ``Call`` with its id; a
``Reply`` or a ``Failure``; a turn's events in ``TurnEvent``. Streamed tokens are
the one exception: they cross as the plain tuples ``("tok", rid, text, id)`` and
``("toks", rid, [(text, id), …])`` (several turns' at once:
``("tokset", 0, [(rid, text, id), …])``), the hot path of decoding (a tuple pickles
several times faster than a dataclass).

Adding an operation is a request here and one handler in the engine process
(``process/serving/handlers.py``)::

    @dataclass(frozen=True)
    class Tokenize(Request[list[int]]):  # the reply type
        text: str

    @handles(rq.Tokenize)
    def tokenize(ctx: Context, r: rq.Tokenize) -> list[int]:
        return ctx.require_runtime().tokenize(r.text, special=False)

and a caller sends it with ``client.call(rq.Tokenize("hi"))`` (typed ``list[int]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.images import ImageInput
from vllmchat.core.engine.info import (
    KvUsage,
    ModelInfo,
    ProcessMemory,
    ReloadResult,
    ScoreRequest,
    SpeedSample,
    StateTransfer,
    TextScore,
)
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.settings import LoadSettings, SamplingSettings

ReplyT = TypeVar("ReplyT")

UNREAD = 0  # the id of a ``Failure`` for a request the engine could not unpickle


@dataclass(frozen=True)
class LoadedModel:
    """What the engine holds: the settings it loaded and the model they gave."""

    settings: LoadSettings
    info: ModelInfo


@dataclass(frozen=True)
class Request(Generic[ReplyT]):
    """An operation of the engine process, answered by a ``ReplyT``.

    A request type may declare: ``stoppable`` (``Stop`` ends it within a token),
    ``starts`` (the client starts the engine process for it), ``changes_model``
    (the engine lets its model go first; after a failure none is loaded),
    ``streams`` (answered by ``TurnEvent``s and token tuples, not a ``Reply``).
    """

    stoppable: ClassVar[bool] = False
    starts: ClassVar[bool] = False
    changes_model: ClassVar[bool] = False
    streams: ClassVar[bool] = False

    def held(self, before: LoadedModel | None, reply: ReplyT) -> LoadedModel | None:
        """What the engine holds after answering ``reply`` (the client keeps it)."""
        return None if self.changes_model else before


def reply_type(kind: type[Request[Any]]) -> Any:
    """The ``ReplyT`` a request type declares (``Tokenize`` -> ``list[int]``)."""
    for klass in kind.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if get_origin(base) is Request:
                return get_args(base)[0]
    raise TypeError(f"{kind.__name__} does not name its reply type: subclass Request[ReplyT]")


@dataclass(frozen=True)
class Ping(Request[str]):
    pass


@dataclass(frozen=True)
class Load(Request[ModelInfo]):
    starts: ClassVar[bool] = True
    changes_model: ClassVar[bool] = True
    settings: LoadSettings

    def held(self, before: LoadedModel | None, reply: ModelInfo) -> LoadedModel | None:
        return LoadedModel(self.settings, reply)


@dataclass(frozen=True)
class Reload(Request[ReloadResult]):
    """Load with new settings, carrying the KV state over where it can."""

    changes_model: ClassVar[bool] = True
    settings: LoadSettings

    def held(self, before: LoadedModel | None, reply: ReloadResult) -> LoadedModel | None:
        return LoadedModel(self.settings, reply.info)


@dataclass(frozen=True)
class ExportState(Request[StateTransfer]):
    path: str


@dataclass(frozen=True)
class ImportState(Request[StateTransfer]):
    path: str


@dataclass(frozen=True)
class RememberReplies(Request[None]):
    pairs: Sequence[tuple[str, Sequence[int]]]


@dataclass(frozen=True)
class Probe(Request[HardwareInfo]):
    starts: ClassVar[bool] = True


@dataclass(frozen=True)
class Memory(Request[ProcessMemory]):
    pass


@dataclass(frozen=True)
class SetThreads(Request[None]):
    n_threads: int
    n_threads_batch: int

    def held(self, before: LoadedModel | None, reply: None) -> LoadedModel | None:
        if before is None:
            return None
        threads = {"n_threads": self.n_threads, "n_threads_batch": self.n_threads_batch}
        return replace(before, settings=before.settings.with_changes(**threads))


@dataclass(frozen=True)
class Measure(Request[SpeedSample]):
    stoppable: ClassVar[bool] = True
    prompt_tokens: int
    decode_tokens: int


@dataclass(frozen=True)
class Score(Request[TextScore]):
    """Scoring loads the scored file in place of the chat model."""

    stoppable: ClassVar[bool] = True
    starts: ClassVar[bool] = True
    changes_model: ClassVar[bool] = True
    request: ScoreRequest


@dataclass(frozen=True)
class Quantize(Request[int]):
    starts: ClassVar[bool] = True
    source: str
    target: str
    ftype: str
    n_threads: int


@dataclass(frozen=True)
class Kv(Request[KvUsage]):
    pass


@dataclass(frozen=True)
class Tokenize(Request[list[int]]):
    text: str


@dataclass(frozen=True)
class ControlTokens(Request[list[int]]):
    ids: Sequence[int]


@dataclass(frozen=True)
class Render(Request[list[int]]):
    messages: Sequence[Mapping[str, str]]
    images: Sequence[ImageInput] = ()
    tools: str | None = None  # OpenAI's tools list (JSON), as a turn offers them
    thinking: bool = True
    raw: bool = False  # the one message's content is the whole prompt (no template)


@dataclass(frozen=True)
class Chat(Request[None]):
    """A turn: streamed as token tuples and ``TurnEvent``s, ending in Done or Error."""

    streams: ClassVar[bool] = True
    stoppable: ClassVar[bool] = True
    messages: Sequence[Mapping[str, str]]
    sampling: SamplingSettings
    options: ChatOptions = PLAIN  # its images cross as bytes or paths


@dataclass(frozen=True)
class Call:
    """A request and its id (replies and events carry the id back)."""

    rid: int
    request: Request[Any]


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


@dataclass(frozen=True)
class SlotChat(Chat):
    """An API client's turn in a sequence of its own, batched with the others running.

    The engine starts from the kept state sharing most of the prompt (``client``'s
    own first: in a slot, its RAM or a state file), prefills what the prompt adds,
    and keeps what the turn leaves under ``client`` (or a name of its own).
    ``reuse`` off: the prompt is read whole. ``fork_window``: a task of the window's
    conversation (its title, its summary) that starts from a copy of the window
    sequence's cells, the window's own left as they are; nothing is kept after it.
    """

    client: str = ""
    reuse: bool = True
    fork_window: bool = False


SLOT_LOOP_REQUESTS: tuple[type[Request[Any]], ...] = (SlotChat,)
"""Requests the engine's slot loop takes between steps, not a handler."""


def tokens_message(batch: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """One message for ``("tok", rid, text, id)`` tuples sent one after another: the
    tuple alone; ``("toks", rid, [(text, id), ...])`` for one turn's;
    ``("tokset", 0, [(rid, text, id), ...])`` for several turns' (in their order)."""
    if len(batch) == 1:
        return batch[0]
    rid = batch[0][1]
    if all(m[1] == rid for m in batch):
        return ("toks", rid, [(m[2], m[3]) for m in batch])
    return ("tokset", 0, [(m[1], m[2], m[3]) for m in batch])
