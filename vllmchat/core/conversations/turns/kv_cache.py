"""Saved KV states of conversations, so reopening one prefills only the new message.

A state is saved when a conversation is left or the app exits (when it holds
enough tokens to be cheaper to read than to recompute), in the cache folder,
under a size cap with least-recently-used eviction. A state that no longer
matches (another model or settings) is refused by the engine and deleted; one
whose tokens no longer match the history is reused only up to the first
differing token, so the history is always re-prefilled correctly.
"""

from __future__ import annotations

import os
from pathlib import Path

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.protocol import Engine

MIN_TOKENS = 64
DEFAULT_CAP = 2 << 30


class KVStateCache:
    """KV state files of conversations in one folder."""

    def __init__(self, folder: str | Path, *, cap_bytes: int = DEFAULT_CAP) -> None:
        self.folder = Path(folder)
        self.cap_bytes = cap_bytes
        self.failure: str | None = None  # why the last save did not reach the disk

    def path_for(self, conversation_id: int) -> Path:
        return self.folder / f"conversation-{conversation_id}.kv"

    def save(self, client: Engine, conversation_id: int, *, background: bool = False) -> int:
        """Save the engine's KV state for this conversation; returns tokens saved (0: not saved).

        ``background``: the engine copies the state and writes the file on a thread of
        its own (a checkpoint after a turn, which must not delay the next one).
        """
        try:
            tokens = client.kv().kv_tokens
            if tokens < MIN_TOKENS:
                return 0
            self.folder.mkdir(parents=True, exist_ok=True)
            path = str(self.path_for(conversation_id))
            saved = client.checkpoint(path) if background else client.export_state(path)
        except EngineError as exc:
            if exc.kind == ErrorKind.STORAGE:
                self.failure = exc.message
            return 0
        except OSError as exc:  # the folder itself cannot be made
            self.failure = (
                f"The conversation is saved; its KV state could not be written "
                f"({exc.strerror or exc}): the next start re-reads it."
            )
            return 0
        self.failure = None
        self.evict()
        return saved.tokens

    def restore(self, client: Engine, conversation_id: int) -> int:
        """Load the saved state; returns tokens restored, 0 if none or refused (then deleted)."""
        path = self.path_for(conversation_id)
        if not path.exists():
            return 0
        try:
            restored = client.import_state(str(path))
        except EngineError:
            path.unlink(missing_ok=True)
            return 0
        os.utime(path)  # most recently used
        return restored.tokens

    def forget(self, conversation_id: int) -> None:
        self.path_for(conversation_id).unlink(missing_ok=True)

    def evict(self) -> list[Path]:
        """Delete the least recently used states until the folder is under the cap."""
        files = sorted(self.folder.glob("conversation-*.kv"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        removed = []
        while files and total > self.cap_bytes:
            oldest = files.pop(0)
            total -= oldest.stat().st_size
            oldest.unlink(missing_ok=True)
            removed.append(oldest)
        return removed
