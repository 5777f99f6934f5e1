"""KV states kept by name in the engine process's RAM, for the clients of the API.

The slot loop keeps each API turn's state under its client's key (``SlotPlan``);
``Kept`` tells its tokens and size, ``Spill`` writes one to a state file and frees
its RAM, ``Forget`` drops some. Kept states belong to the model loaded: a load or
reload drops them. An engine with ``Capabilities.kv_stash`` serves these (the local
engine).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import Event
from vllmchat.core.engine.info import StateTransfer
from vllmchat.core.engine.requests import Kept, KeptState, Request
from vllmchat.core.settings import SamplingSettings


@dataclass(frozen=True)
class Spill(Request[StateTransfer]):
    """Write the state stashed under ``key`` to a state file at ``path``; free its RAM."""

    key: str
    path: str


@dataclass(frozen=True)
class Forget(Request[None]):
    """Drop these stashes (unknown keys are ignored)."""

    keys: tuple[str, ...]


class SlotPlan(NamedTuple):
    """Where an API client's turn starts and what it keeps (``SlotChat``'s fields)."""

    from_key: str = ""
    keep_as: str = ""
    state_file: str = ""


@runtime_checkable
class RunsSlots(Protocol):
    """An engine that runs API turns in slots of their own (``EngineClient``)."""

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = ...,
        *,
        slot: SlotPlan | None = None,
        ticket: int = 0,
    ) -> Iterator[Event]: ...

    def stop_slot(self, ticket: int) -> None:
        """Stop the slot turn started with ``ticket`` (any thread)."""


@runtime_checkable
class ServesRequests(Protocol):
    """An engine that answers typed requests (``EngineClient``)."""

    def call(self, request: Request[Any]) -> Any: ...


class KvStash:
    """The stash operations of one engine."""

    def __init__(self, engine: ServesRequests) -> None:
        self.engine = engine

    def spill(self, key: str, path: str) -> StateTransfer:
        done: StateTransfer = self.engine.call(Spill(key, path))
        return done

    def forget(self, keys: Sequence[str]) -> None:
        self.engine.call(Forget(tuple(keys)))

    def kept(self, key: str) -> KeptState | None:
        """The tokens and size of the state the engine keeps as ``key`` (after a turn)."""
        state: KeptState | None = self.engine.call(Kept(key))
        return state


def stash_of(engine: object) -> KvStash | None:
    """The stash of ``engine`` when its capabilities say it keeps one."""
    capabilities = getattr(engine, "capabilities", None)
    if capabilities is None or not capabilities.kv_stash or not isinstance(engine, ServesRequests):
        return None
    return KvStash(engine)
