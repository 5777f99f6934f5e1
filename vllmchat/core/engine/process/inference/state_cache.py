"""The KV states kept by key, the window's conversations' and the API clients': in
RAM under a budget, then spilled to state files in the model's folder under a size
cap for the whole root (the oldest files go first, another model's too), indexed
there so that they outlive the app.

A prompt's turn starts from the state whose tokens are the longest exact prefix of
it (its client's own first). Files are written by a thread of their own, so a spill
never holds up a decode step; a state being written is read from memory meanwhile.
A conversation's state is written at once (``keep_written``), so that a crash of
the app loses little.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from vllmchat.core.engine.api_states import (
    DISK,
    RAM,
    WINDOW_PREFIX,
    ClientState,
    StatesChanged,
)
from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.process.llama.state_file import KVState, read_state, write_state

_log = logging.getLogger(__name__)

MIN_REUSE = 16  # fewer shared tokens than this are not worth a restore
UNBOUND_RAM = 2048 * 2**20  # the budget until the app names one (no folder: no spill)


@dataclass(frozen=True)
class Entry:
    """A kept state: its tokens (the prompt's, then the reply's), where it is."""

    key: str
    tokens: tuple[int, ...] = field(repr=False)
    prompt_tokens: int
    size: int
    where: str  # RAM or DISK
    used: float
    named: bool


@dataclass(frozen=True)
class Planned:
    """Where a turn starts (``from_key``: a kept state, "" none) and the key it keeps."""

    from_key: str
    keep_as: str


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token lists, compared in slices by halves
    (a turn's start compares its prompt with every kept state)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest k with a[:k] == b[:k]
        mid = (lo + hi + 1) // 2
        if list(a[lo:mid]) == list(b[lo:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


def binding_folder(root: str | Path, model_path: str, binding: dict[str, Any]) -> Path:
    """Where the states of one model and KV layout live, under ``root``."""
    text = json.dumps({"model": os.path.abspath(model_path), **binding}, sort_keys=True)
    return Path(root) / hashlib.sha256(text.encode()).hexdigest()[:16]


class StateCache:
    """The kept states of the model loaded (``bind`` to each one)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.binding: dict[str, Any] = {}
        self.folder: Path | None = None
        self.ram_budget, self.disk_cap = UNBOUND_RAM, 0
        self.failure = ""  # why the last spill did not reach the disk
        self.ram: dict[str, KVState] = {}
        self.entries: dict[str, Entry] = {}
        self._writing: dict[str, KVState] = {}  # spilled, its file not written yet
        self._lock = threading.Lock()  # entries are also changed by the writer
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None

    # -- which model, which folder -------------------------------------------------
    def bind(self, binding: dict[str, Any], folder: Path | None, ram: int, disk: int) -> None:
        """Keep the states of ``binding`` (in ``folder``, None: RAM only); the states of
        another binding are written to their folder and let go first."""
        same = binding == self.binding and folder == self.folder
        self.ram_budget, self.disk_cap = ram, disk
        if same:
            self._within_budgets()
            return
        self.save_all()
        with self._lock:
            self.ram.clear()
            self.entries.clear()
        self.binding, self.folder = binding, folder
        self.failure = ""
        self._read_index()
        self._within_budgets()
        self._within_root_cap()

    # -- a turn ------------------------------------------------------------------------
    def plan(self, prompt: Sequence[int], client: str, reuse: bool = True) -> Planned:
        """The state ``prompt``'s turn starts from (the one sharing most of it, the
        client's own first, then the most recent) and the key its result is kept as."""
        best, shared = "", 0
        with self._lock:  # the window's conversations are its own
            choices = sorted(
                (s for s in self.entries.values() if not s.key.startswith(WINDOW_PREFIX)),
                key=lambda s: (s.key != client, -s.used),
            )
        for state in choices if reuse else ():
            n = min(shared_prefix(state.tokens, prompt), len(prompt) - 1)
            if n > shared:
                best, shared = state.key, n
        if shared < MIN_REUSE:
            best, shared = "", 0
        chosen = self.entries.get(best)
        if client:
            return Planned(best, client)
        if chosen is not None and not chosen.named and shared >= chosen.prompt_tokens:
            return Planned(best, best)  # a continuation keeps its state's key
        return Planned(best, "client-" + uuid.uuid4().hex[:12])

    def state(self, key: str) -> KVState | None:
        """The state kept as ``key`` (from RAM, or its file), None where it is gone."""
        with self._lock:
            found = self.ram.get(key) or self._writing.get(key)
            entry = self.entries.get(key)
        if found is not None or entry is None or self.folder is None:
            return found
        try:
            return read_state(self._file(key), expect=self.binding)
        except EngineError as exc:
            _log.info("A KV state file could not be read: %s", exc)
            self._drop(key)
            return None

    def keep(
        self, key: str, tokens: list[int], data: bytes | bytearray, prompt_tokens: int, named: bool
    ) -> None:
        """Keep a turn's state as ``key`` (in RAM), within the budgets."""
        entry = Entry(
            key, tuple(tokens), min(prompt_tokens, len(tokens)), len(data), RAM, self.clock(), named
        )
        with self._lock:
            self.ram[key] = KVState(self.binding, list(tokens), data)
            self._writing.pop(key, None)
            self.entries[key] = entry
        self._within_budgets()

    def reserve(
        self, key: str, tokens: list[int], size: int, prompt_tokens: int, named: bool
    ) -> None:
        """List ``key``'s state (``size`` bytes) before its bytes come with ``keep``,
        which must come before anything asks for the state."""
        entry = Entry(
            key, tuple(tokens), min(prompt_tokens, len(tokens)), size, RAM, self.clock(), named
        )
        with self._lock:
            self.entries[key] = entry

    def keep_written(self, key: str, tokens: list[int], data: bytes | bytearray) -> None:
        """Keep ``key``'s state and write its file now (on the writer), within the cap."""
        self.keep(key, tokens, data, len(tokens), named=True)
        entry = self.entries.get(key)
        if entry is not None and entry.where == RAM:
            self._spill(entry)
            self._within_budgets()
            self._index_later()

    def forget(self, key: str) -> None:
        """Let ``key``'s state go, its file too."""
        if key in self.entries:
            self._drop(key)
            self._index_later()

    def snapshot(self) -> StatesChanged:
        with self._lock:
            states = sorted(self.entries.values(), key=lambda s: -s.used)
            failure = self.failure
        return StatesChanged(
            tuple(
                ClientState(s.key, len(s.tokens), s.prompt_tokens, s.size, s.where, s.used, s.named)
                for s in states
            ),
            sum(s.size for s in states if s.where == RAM),
            sum(s.size for s in states if s.where == DISK),
            failure,
        )

    # -- budgets and files -------------------------------------------------------------
    def _within_budgets(self) -> None:
        with self._lock:
            entries = sorted(self.entries.values(), key=lambda s: s.used)
        in_ram = [s for s in entries if s.where == RAM]
        total = sum(s.size for s in in_ram)
        changed = False  # the files: the index is written only when they change
        for entry in in_ram:
            if total <= self.ram_budget:
                break
            total -= entry.size
            self._spill(entry)
            changed = True
        with self._lock:
            on_disk = sorted(
                (s for s in self.entries.values() if s.where == DISK), key=lambda s: s.used
            )
        total = sum(s.size for s in on_disk)
        for entry in on_disk:
            if total <= self.disk_cap:
                break
            total -= entry.size
            self._drop(entry.key)
            changed = True
        if changed:
            self._index_later()

    def _within_root_cap(self) -> None:
        """Delete other models' oldest state files until the root is within the cap."""
        if self.folder is None:
            return
        try:
            others = [
                (f.stat(), f) for f in self.folder.parent.glob("*/*.kv") if f.parent != self.folder
            ]
        except OSError:
            return
        with self._lock:
            total = sum(s.size for s in self.entries.values() if s.where == DISK)
        total += sum(st.st_size for st, _ in others)
        for st, path in sorted(others, key=lambda o: o[0].st_mtime):
            if total <= self.disk_cap:
                break
            with contextlib.suppress(OSError):  # its index skips a file that is gone
                path.unlink()
                total -= st.st_size

    def _index_later(self) -> None:
        """Write the index once the files asked for so far are written."""
        folder = self.folder
        self._later(lambda: self._write_index(folder))

    def _spill(self, entry: Entry) -> None:
        if self.folder is None or self.disk_cap <= 0:  # nowhere to spill: the state goes
            self._drop(entry.key)
            return
        with self._lock:
            state = self.ram.pop(entry.key, None)
            if state is None:
                return
            self._writing[entry.key] = state
            self.entries[entry.key] = replace(entry, where=DISK)
        path = self._file(entry.key)
        self._later(lambda: self._write(entry.key, state, path))

    def _write(self, key: str, state: KVState, path: Path) -> None:
        """On the writer: a spilled state's file (a state that cannot be written goes)."""
        try:
            size = write_state(path, state)
        except OSError as exc:
            with self._lock:
                self.failure = (
                    f"A KV state could not be written ({exc.strerror or exc}); it was "
                    "dropped, and that prompt is read again next time."
                )
            self._drop(key, only=state)
            return
        with self._lock:
            self.failure = ""
            if self._writing.get(key) is state:
                del self._writing[key]
            entry = self.entries.get(key)
            if entry is not None and entry.where == DISK:
                self.entries[key] = replace(entry, size=size)
            elif entry is None:
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)  # dropped while it was written

    def _drop(self, key: str, only: KVState | None = None) -> None:
        with self._lock:
            if only is not None and self._writing.get(key) is not only:
                return  # kept again since
            self.entries.pop(key, None)
            self.ram.pop(key, None)
            self._writing.pop(key, None)
        if self.folder is not None:
            with contextlib.suppress(OSError):  # an unusable folder: nothing there to drop
                self._file(key).unlink(missing_ok=True)

    def _file(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{key}.kv"

    def save_all(self) -> None:
        """Spill every state in RAM (within the disk cap) and wait for the files."""
        with self._lock:
            in_ram = sorted(
                (s for s in self.entries.values() if s.where == RAM), key=lambda s: -s.used
            )
        for entry in in_ram:
            self._spill(entry)
        self._within_budgets()
        if in_ram:
            self._index_later()
        self.flush()

    def flush(self) -> None:
        """Wait until every file asked for is written."""
        if self._writer is None:
            return
        done = threading.Event()
        self._jobs.put(done.set)
        done.wait(60)

    def close(self) -> None:
        self.save_all()
        if self._writer is not None:
            self._jobs.put(None)
            self._writer.join(60)
            self._writer = None

    def _later(self, job: Callable[[], None]) -> None:
        if self.folder is None:
            return
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._write_loop, name="vllmchat-states", daemon=True
            )
            self._writer.start()
        self._jobs.put(job)

    def _write_loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:  # a writer that died would lose every later state
                _log.exception("A KV state could not be written")

    def _write_index(self, folder: Path | None) -> None:
        if folder is None:
            return
        with self._lock:
            on_disk = [asdict(s) for s in self.entries.values() if s.where == DISK]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / "index.json.tmp"
            tmp.write_text(json.dumps({"version": 1, "states": on_disk}), encoding="utf-8")
            os.replace(tmp, folder / "index.json")
        except OSError as exc:
            with self._lock:
                self.failure = f"The kept KV states could not be indexed ({exc.strerror or exc})."

    def _read_index(self) -> None:
        """The states a previous run left (a damaged index is set aside)."""
        if self.folder is None:
            return
        index = self.folder / "index.json"
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
            for raw in data["states"]:
                entry = Entry(**{**raw, "tokens": tuple(raw["tokens"]), "where": DISK})
                if self._file(entry.key).is_file():
                    self.entries[entry.key] = entry
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _log.warning("The KV states' index is damaged (%s): starting afresh.", exc)
            self.entries.clear()
