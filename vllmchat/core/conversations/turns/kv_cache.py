"""The conversations' KV states, so reopening one prefills only the new message.

The engine process keeps them (``StateCache``, beside the API clients' states) by
key, ``conversation-<id>``: written to a state file in a folder per model and KV
layout under ``root`` when a conversation is left, after each turn (in the
background) and at exit, within one disk cap for the whole root. This side tells
each engine where once, and asks for a conversation's state by its key. A state
whose tokens no longer match the history is reused only up to the first differing
token, so the history is always re-prefilled correctly; another model's states stay
in their own folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from vllmchat.core.engine.api_states import (
    ForgetState,
    KeepStates,
    KeepWindow,
    ResumeWindow,
    ServesRequests,
    StatesChanged,
    WindowKept,
    keeps_window_states,
    window_key,
)
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import Engine

MIB = 1 << 20
DEFAULT_CAPS = (2048 * MIB, 8192 * MIB)  # bytes in the engine's RAM, on disk


class KVStateCache:
    """Where the engine keeps its KV states, and the conversations' among them."""

    def __init__(
        self,
        root: str | Path,
        *,
        caps: Callable[[], tuple[int, int]] = lambda: DEFAULT_CAPS,
    ) -> None:
        self.root = Path(root)
        self.caps = caps  # read at each use: (RAM budget, disk cap) in bytes
        self.failure: str | None = None  # why the last state did not reach the disk
        self._told: tuple[int | None, int, int] | None = None  # which engine, which caps

    def bind(self, engine: Engine) -> StatesChanged | None:
        """Tell ``engine`` where to keep its states (once per process and caps); the
        states then, or None where it was told already or keeps none."""
        if not keeps_window_states(engine) or engine.info is None or not engine.alive:
            return None
        ram, disk = self.caps()
        told = (engine.pid, ram, disk)
        if self._told == told:
            return None
        assert isinstance(engine, ServesRequests)
        states: StatesChanged = engine.call(KeepStates(str(self.root), ram, disk))
        self._told = told
        return states

    @property
    def told(self) -> bool:
        """Whether an engine was told where to keep its states."""
        return self._told is not None

    def save(self, engine: Engine, conversation_id: int, *, background: bool = False) -> int:
        """Keep the engine's state of this conversation; returns its tokens (0: none
        kept). ``background``: the file is written while the next turn goes on."""
        try:
            self.bind(engine)
            if not self.told or not keeps_window_states(engine):
                return 0
            assert isinstance(engine, ServesRequests)
            kept: WindowKept = engine.call(
                KeepWindow(window_key(conversation_id), wait=not background)
            )
        except EngineError as exc:
            if exc.kind == ErrorKind.STORAGE:
                self.failure = exc.message
            return 0
        self.failure = f"The conversation is saved. {kept.failure}" if kept.failure else None
        return kept.tokens

    def restore(self, engine: Engine, conversation_id: int) -> int:
        """Make this conversation's kept state the engine's; returns its tokens (0: none,
        or one that no longer loads, which is let go)."""
        try:
            self.bind(engine)
            if not self.told or not keeps_window_states(engine):
                return 0
            assert isinstance(engine, ServesRequests)
            tokens: int = engine.call(ResumeWindow(window_key(conversation_id)))
        except EngineError:
            return 0
        return tokens

    def forget(self, engine: Engine, conversation_id: int) -> None:
        """Let a deleted conversation's states go: the engine's, and the files other
        models left for it."""
        if keeps_window_states(engine) and engine.alive and engine.info is not None:
            with contextlib.suppress(EngineError):
                self.bind(engine)
                assert isinstance(engine, ServesRequests)
                engine.call(ForgetState(window_key(conversation_id)))
        for path in self.files(conversation_id):
            with contextlib.suppress(OSError):  # their model's index skips a missing file
                path.unlink()

    def files(self, conversation_id: int) -> list[Path]:
        """The state files kept for this conversation, one per model it ran on."""
        with contextlib.suppress(OSError):
            return sorted(self.root.glob(f"*/{window_key(conversation_id)}.kv"))
        return []
