"""The engine's cache of API clients' KV states: which state a prompt starts from,
RAM then disk within budgets, an index that outlives the process, damaged files."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from vllmchat.core.engine.api_states import DISK, RAM
from vllmchat.core.engine.process.inference import state_cache as sc
from vllmchat.core.engine.process.inference.state_cache import StateCache

BINDING = {"model": "m", "kv": "f16"}
SYSTEM = list(range(100, 140))  # 40 tokens every prompt shares


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def _cache(folder: Path | None, ram: int = 10**6, disk: int = 10**6) -> StateCache:
    cache = StateCache(clock=Clock())
    cache.bind(BINDING, folder, ram, disk)
    return cache


def _keep(cache: StateCache, key: str, tokens: list[int], size: int = 10_000, named=True) -> None:
    cache.keep(key, tokens, bytes([len(key)]) * size, len(tokens), named)


def test_a_prompt_starts_from_the_state_sharing_most_its_clients_own_on_a_tie(
    tmp_path: Path,
) -> None:
    cache = _cache(tmp_path)
    _keep(cache, "ada", [*SYSTEM, 1, 2, 3])
    _keep(cache, "bob", [*SYSTEM, 1, 2, 3, 4, 5])  # more recent
    assert cache.plan([*SYSTEM, 1, 2, 3, 9], "ada") == sc.Planned("ada", "ada")
    assert cache.plan([*SYSTEM, 1, 2, 3, 9], "").from_key == "bob"
    assert cache.plan([*SYSTEM, 1, 2, 3, 4, 5, 6], "ada") == sc.Planned("bob", "ada")
    assert cache.plan([*SYSTEM, 1, 2, 3, 4, 5, 6], "ada", reuse=False).from_key == ""
    assert cache.plan(list(range(5, 60)), "cy") == sc.Planned("", "cy")  # nothing shared


def test_an_anonymous_continuation_keeps_its_states_key(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    _keep(cache, "client-1", [*SYSTEM, 7, 8], named=False)
    assert cache.plan([*SYSTEM, 7, 8, 9, 10], "").keep_as == "client-1"
    branch = cache.plan([*SYSTEM, 7, 99], "")  # shares less than the state's prompt
    assert branch.from_key == "client-1" and branch.keep_as.startswith("client-")
    assert branch.keep_as != "client-1"


def test_past_the_ram_budget_the_least_used_spill_and_a_new_process_finds_them(
    tmp_path: Path,
) -> None:
    cache = _cache(tmp_path, ram=25_000)
    for key in ("a", "b", "c"):
        _keep(cache, key, [*SYSTEM, ord(key)])
    cache.flush()
    where = {s.key: s.where for s in cache.snapshot().states}
    assert where == {"a": DISK, "b": RAM, "c": RAM}
    assert cache.state("a") is not None and cache.state("a").data == bytes([1]) * 10_000
    cache.close()  # the process ends: every state goes to its file
    again = _cache(tmp_path)
    shown = again.snapshot()
    assert {s.key for s in shown.states} == {"a", "b", "c"} and shown.ram_bytes == 0
    assert again.plan([*SYSTEM, ord("b"), 5], "b").from_key == "b"
    assert again.state("b").tokens == [*SYSTEM, ord("b")]


def test_past_the_disk_cap_the_oldest_files_go(tmp_path: Path) -> None:
    cache = _cache(tmp_path, ram=0, disk=25_000)
    for key in ("a", "b", "c"):
        _keep(cache, key, [*SYSTEM, ord(key)])
    cache.flush()
    assert [s.key for s in cache.snapshot().states] == ["c", "b"]
    assert sorted(p.name for p in tmp_path.glob("*.kv")) == ["b.kv", "c.kv"]


def test_a_damaged_index_or_state_file_loses_only_itself(tmp_path: Path, caplog) -> None:
    cache = _cache(tmp_path, ram=0)
    _keep(cache, "a", [*SYSTEM, 1])
    _keep(cache, "b", [*SYSTEM, 2])
    cache.close()
    (tmp_path / "a.kv").write_bytes(b"not a state")
    again = _cache(tmp_path)
    assert again.state("a") is None  # read, refused, let go
    assert [s.key for s in again.snapshot().states] == ["b"]
    assert again.state("b") is not None
    (tmp_path / "index.json").write_text("{ damaged", encoding="utf-8")
    fresh = _cache(tmp_path)
    assert fresh.snapshot().states == () and "damaged" in caplog.text
    _keep(fresh, "c", [*SYSTEM, 3])  # and it goes on
    assert fresh.plan([*SYSTEM, 3, 4], "c").from_key == "c"


def test_a_full_disk_drops_the_state_with_the_reason_and_keeps_the_others(
    tmp_path: Path, monkeypatch
) -> None:
    def full(path, state):  # the disk cannot be filled here: its error is raised instead
        raise OSError(errno.ENOSPC, "No space left on device")

    cache = _cache(tmp_path, ram=15_000)
    monkeypatch.setattr(sc, "write_state", full)
    _keep(cache, "a", [*SYSTEM, 1])
    _keep(cache, "b", [*SYSTEM, 2])  # "a" spills, and cannot be written
    cache.flush()
    shown = cache.snapshot()
    assert [s.key for s in shown.states] == ["b"]
    assert "No space left on device" in shown.failure
    index = json.loads((tmp_path / "index.json").read_text(encoding="utf-8"))
    assert index["states"] == []


def test_another_models_states_go_to_their_folder_when_it_loads(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "one")
    _keep(cache, "a", [*SYSTEM, 1])
    cache.bind({"model": "other"}, tmp_path / "two", 10**6, 10**6)
    assert cache.snapshot().states == ()
    assert (tmp_path / "one" / "a.kv").is_file()
    cache.bind(BINDING, tmp_path / "one", 10**6, 10**6)
    assert [s.where for s in cache.snapshot().states] == [DISK]


@pytest.mark.parametrize("folder", [None])
def test_without_a_folder_states_past_the_budget_go(folder) -> None:
    cache = _cache(folder, ram=15_000)
    _keep(cache, "a", [*SYSTEM, 1])
    _keep(cache, "b", [*SYSTEM, 2])
    assert [s.key for s in cache.snapshot().states] == ["b"]


def test_a_conversations_state_is_written_at_once_and_is_not_an_api_clients(
    tmp_path: Path,
) -> None:
    cache = _cache(tmp_path)
    window = [*SYSTEM, 1, 2, 3]
    cache.keep_written("conversation-7", window, b"w" * 10_000)
    cache.flush()
    assert (tmp_path / "conversation-7.kv").is_file()  # a crash of the app loses nothing
    assert cache.snapshot().states[0].where == DISK
    assert cache.state("conversation-7").tokens == window
    assert cache.plan([*window, 4], "").from_key == ""  # the window's are its own
    cache.close()
    again = _cache(tmp_path)  # and the next start finds it
    assert again.state("conversation-7").data == b"w" * 10_000
    again.forget("conversation-7")
    again.flush()
    assert not (tmp_path / "conversation-7.kv").exists()
    assert again.snapshot().states == ()


def test_one_disk_cap_holds_for_every_models_folder(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "one", ram=0, disk=10**6)
    _keep(cache, "a", [*SYSTEM, 1])
    _keep(cache, "b", [*SYSTEM, 2])
    cache.flush()
    (tmp_path / "one" / "a.kv").touch()  # "b" is the older file now
    import os

    os.utime(tmp_path / "one" / "b.kv", (1000, 1000))
    cache.bind({"model": "other"}, tmp_path / "two", 0, 25_000)  # room for two of three
    _keep(cache, "c", [*SYSTEM, 3])
    cache.flush()
    cache.bind({"model": "third"}, tmp_path / "three", 0, 25_000)
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*.kv"))
    assert left == ["one/a.kv", "two/c.kv"], "another model's oldest file went"
