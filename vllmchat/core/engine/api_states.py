"""The KV states the engine process keeps by key, the window's conversations'
(``conversation-<id>``) and the API clients': what a caller sends (``KeepStates``,
``ApiSlot``, ``KeepWindow``, ``ResumeWindow``, ``ForgetState``, ``SaveStates``) and
reads back (``StatesChanged``, ``WindowKept``, and a ``StatesEvent`` ending each slot
turn).

The engine process owns them: a returning client's prompt is read from its first
new token, from its slot, its RAM, or a state file in ``KeepStates``' folder, which
outlives the app; a conversation reopened reads only its new message. An engine
with ``Capabilities.api_slots`` runs the slots; one with ``kv_files`` keeps the
window's states (the local engine does both).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import Event
from vllmchat.core.engine.requests import Request
from vllmchat.core.settings import SamplingSettings

RAM, DISK = "ram", "disk"
WINDOW_PREFIX = "conversation-"  # the keys of the window's conversations


def window_key(conversation_id: int) -> str:
    """The key of a conversation's state."""
    return f"{WINDOW_PREFIX}{conversation_id}"


@dataclass(frozen=True)
class ClientState:
    """A client's kept KV state: its tokens' count (the prompt's first), where it is."""

    key: str
    tokens: int
    prompt_tokens: int  # of ``tokens``, the prompt's (exact); the rest were sampled
    size: int  # bytes
    where: str  # RAM or DISK
    used: float  # time.time() of its last use
    named: bool  # the client named itself (prompt_cache_key, user, a header)


@dataclass(frozen=True)
class StatesChanged:
    """The kept states now, most recently used first; RAM and disk use in bytes;
    ``failure``: why the last state did not reach the disk ("" when it did)."""

    states: tuple[ClientState, ...] = ()
    ram_bytes: int = 0
    disk_bytes: int = 0
    failure: str = ""


@dataclass(frozen=True)
class StatesEvent:
    """A slot turn's state, kept as ``kept_as`` (sent before its ``DoneEvent``);
    ``place_s``: its prompt rendered and the state it started from made live."""

    kept_as: str
    states: StatesChanged
    place_s: float = 0.0


@dataclass(frozen=True)
class ApiSlot:
    """An API turn's slot: its client's own name for its state ("": the engine finds
    the state sharing most of the prompt, and names what the turn leaves);
    ``reuse`` off: the prompt is read whole (llama-server's ``cache_prompt``);
    ``fork_window``: a task of the window's conversation, from a copy of its cells."""

    client: str = ""
    reuse: bool = True
    fork_window: bool = False


@dataclass(frozen=True)
class KeepStates(Request[StatesChanged]):
    """Keep the clients' states under ``root``, a folder per model and KV layout (its
    index read there): ``ram_budget`` bytes in RAM, the least used then spill to
    files, up to ``disk_cap`` bytes (the oldest go first). Each load keeps to it."""

    root: str
    ram_budget: int
    disk_cap: int


@dataclass(frozen=True)
class WindowKept:
    """A conversation's state kept by ``KeepWindow``: its tokens (0: too few to be
    worth a file) and bytes; ``failure``: why the last state did not reach the disk."""

    tokens: int = 0
    size: int = 0
    failure: str = ""


@dataclass(frozen=True)
class KeepWindow(Request[WindowKept]):
    """Keep the window sequence's state as ``key`` (``window_key``), its file written
    on the engine's writer thread; ``wait``: answer once the file is written."""

    key: str
    wait: bool = False


@dataclass(frozen=True)
class ResumeWindow(Request[int]):
    """Make the state kept as ``key`` the window sequence's; answers its tokens (0:
    none kept, or one that no longer loads, which is then let go)."""

    key: str


@dataclass(frozen=True)
class ForgetState(Request[StatesChanged]):
    """Let the state kept as ``key`` go, its file too (a deleted conversation)."""

    key: str


@dataclass(frozen=True)
class SaveStates(Request[StatesChanged]):
    """Write every state in RAM to its file (before the app closes)."""


@dataclass(frozen=True)
class ListStates(Request[StatesChanged]):
    """The states kept now."""


@runtime_checkable
class RunsSlots(Protocol):
    """An engine that runs API turns in slots of their own (``EngineClient``)."""

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = ...,
        *,
        slot: ApiSlot | None = None,
        ticket: int = 0,
    ) -> Iterator[Event]: ...

    def stop_slot(self, ticket: int) -> None:
        """Stop the slot turn started with ``ticket`` (any thread)."""


@runtime_checkable
class ServesRequests(Protocol):
    """An engine that answers typed requests (``EngineClient``)."""

    def call(self, request: Request[Any]) -> Any: ...


def _capable(engine: object, capability: str, *kinds: type) -> bool:
    """Whether ``engine``'s capabilities set ``capability`` and it is each of ``kinds``."""
    capabilities = getattr(engine, "capabilities", None)
    return (
        capabilities is not None
        and bool(getattr(capabilities, capability))
        and all(isinstance(engine, kind) for kind in kinds)
    )


def keeps_window_states(engine: object) -> bool:
    """Whether ``engine`` keeps the window's conversation states by key (``kv_files``)."""
    return _capable(engine, "kv_files", ServesRequests)


def keeps_states(engine: object) -> bool:
    """Whether ``engine``'s capabilities say it runs API slots and keeps their states."""
    return _capable(engine, "api_slots", ServesRequests, RunsSlots)
