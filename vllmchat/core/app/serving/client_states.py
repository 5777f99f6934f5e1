"""Each API client's KV state, kept so that a returning client's prompt is read from
its first new token, even after other clients ran, and after a restart.

A state is a sequence's cells as a turn left them, with its token ids: the engine
keeps it in its RAM (and in the slot, while no other turn needs it) under a budget;
past it, the least recently used spill to the app's data folder, under a size cap
(the oldest files go first). An index of them is kept beside the files, so they
outlive the app. A request starts from the state of the client it names; otherwise
(or when that one shares less of its prompt) the state whose tokens are the longest
exact prefix of its prompt. Only tokens that match exactly are ever reused: the
engine cuts a state back to the shared prefix.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.kv_stash import KvStash
from vllmchat.core.listeners import Listeners

_log = logging.getLogger(__name__)

MIN_REUSE = 16  # fewer shared tokens than this are not worth a restore
RAM, DISK = "ram", "disk"


@dataclass(frozen=True)
class ClientState:
    """A client's saved KV state: its tokens (the prompt's, then the reply's)."""

    key: str
    tokens: tuple[int, ...] = field(repr=False)
    prompt_tokens: int  # of ``tokens``, the prompt's (exact); the rest were sampled
    size: int  # bytes
    where: str  # RAM or DISK
    used: float  # time.time() of its last use
    named: bool  # the client named itself (prompt_cache_key, user, a header)


@dataclass(frozen=True)
class Planned:
    """Where a prompt's turn starts: the kept state ``from_key`` (RAM, DISK at
    ``state_file``, or "none"), sharing ``shared`` tokens of it."""

    key: str  # the state the turn's result is kept under
    shared: int  # tokens of the prompt the state holds (its exact prefix)
    source: str  # RAM, DISK or "none"
    from_key: str = ""
    state_file: str = ""


@dataclass(frozen=True)
class StatesChanged:
    """The saved states now, most recently used first; RAM and disk use in bytes."""

    states: tuple[ClientState, ...]
    ram_bytes: int
    disk_bytes: int


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token lists (compared in slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest k with a[:k] == b[:k], by halves
        mid = (lo + hi + 1) // 2
        if list(a[lo:mid]) == list(b[lo:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


def binding_folder(root: Path, model_path: str, binding: dict[str, Any]) -> Path:
    """Where the states of one model and KV layout live."""
    text = json.dumps({"model": os.path.abspath(model_path), **binding}, sort_keys=True)
    return root / hashlib.sha256(text.encode()).hexdigest()[:16]


class ClientStates:
    """The clients' states of one model: in RAM under ``ram_budget``, on disk under
    ``disk_cap`` (bytes), indexed in ``folder``."""

    def __init__(
        self,
        stash: KvStash,
        folder: Path,
        *,
        ram_budget: int,
        disk_cap: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stash = stash
        self.folder = folder
        self.ram_budget = ram_budget
        self.disk_cap = disk_cap
        self.clock = clock
        self.changes: Listeners[StatesChanged] = Listeners("client states")
        self.failure: str | None = None  # why the last spill did not reach the disk
        self._states: dict[str, ClientState] = {}
        self._guard = threading.RLock()  # queries come from other threads (the window)
        self._read_index()

    # -- queries -------------------------------------------------------------------------
    def snapshot(self) -> StatesChanged:
        with self._guard:
            states = sorted(self._states.values(), key=lambda s: -s.used)
        return StatesChanged(
            tuple(states),
            sum(s.size for s in states if s.where == RAM),
            sum(s.size for s in states if s.where == DISK),
        )

    def get(self, key: str) -> ClientState | None:
        return self._states.get(key)

    # -- a turn --------------------------------------------------------------------------
    def plan(self, prompt: Sequence[int], client: str | None) -> Planned:
        """Which kept state ``prompt``'s turn starts from: the one sharing most of it
        (the client's own first, then the most recent), and the key its result is
        kept under."""
        with self._guard:
            best, shared = "", 0
            choices = sorted(self._states.values(), key=lambda s: (s.key != client, -s.used))
            for state in choices:
                n = min(shared_prefix(state.tokens, prompt), len(prompt) - 1)
                if n > shared:
                    best, shared = state.key, n
            if shared < MIN_REUSE:
                best, shared = "", 0
            chosen = self._states.get(best)
            key = client or self._anonymous_key(chosen, shared)
            on_disk = chosen is not None and chosen.where == DISK
            return Planned(
                key,
                max(shared, 0),
                chosen.where if chosen is not None else "none",
                best,
                str(self._file(best)) if on_disk else "",
            )

    def _anonymous_key(self, state: ClientState | None, shared: int) -> str:
        """A continuation keeps its state's key; anything else starts its own."""
        if state is not None and not state.named and shared >= state.prompt_tokens:
            return state.key
        return "client-" + uuid.uuid4().hex[:12]

    def keep(self, key: str, prompt_tokens: int, *, named: bool) -> None:
        """Record the state the engine kept as ``key`` after a turn; keep within budgets."""
        with self._guard:
            self._keep(key, prompt_tokens, named=named)
        self.changes.tell(self.snapshot())

    def _keep(self, key: str, prompt_tokens: int, *, named: bool) -> None:
        try:
            kept = self.stash.kept(key)
        except EngineError as exc:
            _log.info("A client's KV state could not be kept: %s", exc)
            return
        if kept is None:  # the turn failed, or the engine let it go
            return
        tokens = kept.tokens
        self._states[key] = ClientState(
            key, tokens, min(prompt_tokens, len(tokens)), kept.size, RAM, self.clock(), named
        )
        self._within_budgets()

    # -- budgets and files ---------------------------------------------------------------
    def _within_budgets(self) -> None:
        in_ram = sorted((s for s in self._states.values() if s.where == RAM), key=lambda s: s.used)
        total = sum(s.size for s in in_ram)
        for state in in_ram:
            if total <= self.ram_budget:
                break
            total -= state.size
            self._spill(state)
        on_disk = sorted(
            (s for s in self._states.values() if s.where == DISK), key=lambda s: s.used
        )
        total = sum(s.size for s in on_disk)
        for state in on_disk:
            if total <= self.disk_cap:
                break
            total -= state.size
            self._drop(state.key)
        self._write_index()

    def _spill(self, state: ClientState) -> None:
        if self.disk_cap <= 0:  # nowhere to spill: the state goes
            self._drop(state.key)
            return
        try:
            done = self.stash.spill(state.key, str(self._file(state.key)))
        except EngineError as exc:
            self.failure = str(exc)
            self._drop(state.key)
            return
        self.failure = None
        self._states[state.key] = replace(state, where=DISK, size=done.bytes)

    def _drop(self, key: str) -> None:
        state = self._states.pop(key, None)
        if state is not None and state.where == RAM:
            self.stash.forget([key])
        self._file(key).unlink(missing_ok=True)

    def _file(self, key: str) -> Path:
        return self.folder / f"{key}.kv"

    def save_all(self) -> None:
        """Spill every state in RAM to disk (at shutdown), within the disk cap."""
        with self._guard:
            self._save_all()

    def _save_all(self) -> None:
        for state in sorted(self._states.values(), key=lambda s: -s.used):
            if state.where == RAM:
                self._spill(state)
        self._within_budgets()

    def _write_index(self) -> None:
        on_disk = [asdict(s) for s in self._states.values() if s.where == DISK]
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.folder / "index.json.tmp"
            tmp.write_text(json.dumps({"version": 1, "states": on_disk}), encoding="utf-8")
            os.replace(tmp, self.folder / "index.json")
        except OSError as exc:
            self.failure = f"The clients' KV states could not be indexed ({exc.strerror or exc})."

    def _read_index(self) -> None:
        """The states a previous run left on disk (a damaged index is set aside)."""
        index = self.folder / "index.json"
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
            for raw in data["states"]:
                state = ClientState(**{**raw, "tokens": tuple(raw["tokens"]), "where": DISK})
                if self._file(state.key).is_file():
                    self._states[state.key] = state
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _log.warning("The clients' KV state index is damaged (%s): starting afresh.", exc)
            self._states.clear()
