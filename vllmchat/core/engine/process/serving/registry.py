"""Which handler serves each request type in the engine process, and what a handler
may use there.

``@handles(rq.Tokenize)`` registers a function ``(ctx, request) -> reply``; the
worker looks the handler up by the request's type. A request type has one handler:
a second registration is a mistake and raises at import. This module loads no
llama.cpp, so a module that only adds operations imports it cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.settings import LoadSettings

if TYPE_CHECKING:
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.inference.state_cache import StateCache


class Context(Protocol):
    """What a handler may use of the engine process (the ``Worker`` serving it)."""

    runtime: LlamaRuntime | None  # the loaded model
    start_free: int | None  # NVIDIA devices' free bytes before llama.cpp loaded
    states: StateCache  # the KV states kept by key (the loaded model's)
    states_policy: tuple[str, int, int] | None  # their folder root, RAM and disk caps

    def require_runtime(self) -> LlamaRuntime:
        """The loaded model; ``EngineError(NO_MODEL)`` when there is none."""
        ...

    def unload(self) -> None: ...

    def bind_states(self) -> None:
        """Keep the states of the model loaded under ``states_policy``."""
        ...

    def choose_sender(self, settings: LoadSettings) -> None:
        """Pick how messages are sent for a model loaded with ``settings``."""
        ...

    def binding(self, runtime: LlamaRuntime) -> dict[str, Any]:
        """What a saved KV state of ``runtime`` is bound to."""
        ...

    def stop_requested(self) -> bool:
        """Whether the caller stopped this call (check it per token)."""
        ...

    def turn_emitter(self) -> Callable[[Any], None]:
        """A function that sends one event of this call's turn (and gives way between
        tokens where the cores are lent)."""
        ...

    def decoding(self) -> AbstractContextManager[None]:
        """A turn runs within (borrowers of the cores wait for its next token)."""
        ...


RequestT = TypeVar("RequestT", bound="rq.Request[Any]")
ReplyT = TypeVar("ReplyT")
Handler = Callable[[Context, Any], Any]

HANDLERS: dict[type[rq.Request[Any]], Handler] = {}


def handles(
    kind: type[RequestT],
) -> Callable[[Callable[[Context, RequestT], ReplyT]], Callable[[Context, RequestT], ReplyT]]:
    """Register the decorated function as the handler of ``kind``."""

    def register(
        handler: Callable[[Context, RequestT], ReplyT],
    ) -> Callable[[Context, RequestT], ReplyT]:
        if kind in HANDLERS:
            raise TypeError(f"{kind.__name__} already has a handler ({HANDLERS[kind].__name__})")
        HANDLERS[kind] = handler
        return handler

    return register


def handler_for(request: rq.Request[Any]) -> Handler:
    """The handler of ``request``'s type; an ``EngineError`` when there is none."""
    handler = HANDLERS.get(type(request))
    if handler is None:
        raise EngineError(
            ErrorKind.BAD_REQUEST,
            f"The engine has no handler for {type(request).__name__}: "
            "register one with @handles in a module the engine process imports.",
        )
    return handler
