"""The cores the app counts: ``VLLMCHAT_CPUS`` caps them, every thread count keeps to
them; folders made under per-process names; the suite's workers per core."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from vllmchat.core.paths import put_folder, staging_for
from vllmchat.core.settings import LoadSettings, default_threads, usable_cores, within_cores
from vllmchat.setup import cli


def test_vllmchat_cpus_caps_the_cores_and_every_thread_count(monkeypatch) -> None:
    allowed = len(os.sched_getaffinity(0))
    monkeypatch.setenv("VLLMCHAT_CPUS", "1")
    assert usable_cores() == 1
    assert default_threads() == 1
    assert within_cores(8) == 1
    settings = LoadSettings(model_path="m.gguf", n_threads=2, n_threads_batch=4)
    assert (settings.on_usable_cores().n_threads, settings.on_usable_cores().n_threads_batch) == (
        1,
        1,
    )
    same = LoadSettings(model_path="m.gguf", n_threads=1)
    assert same.on_usable_cores() is same  # nothing to lower
    monkeypatch.setenv("VLLMCHAT_CPUS", str(allowed + 10))  # never more than it may use
    assert usable_cores() == allowed


@pytest.mark.parametrize("value", ["", "0", "-3", "two", " "])
def test_a_vllmchat_cpus_that_is_no_count_is_ignored(monkeypatch, value: str) -> None:
    monkeypatch.setenv("VLLMCHAT_CPUS", value)
    assert usable_cores() == len(os.sched_getaffinity(0))


def test_each_process_stages_under_its_own_name_and_a_folder_put_first_stays(
    tmp_path: Path, monkeypatch
) -> None:
    target = tmp_path / "whisper-base"
    staging = staging_for(target)
    assert staging.name == f"whisper-base.{os.getpid()}.partial"
    staging.mkdir()
    (staging / "model.bin").write_bytes(b"mine")
    put_folder(staging, target)
    assert (target / "model.bin").read_bytes() == b"mine" and not staging.exists()

    # another process renamed its folder into place after this one removed the old
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "model.bin").write_bytes(b"theirs")
    again = staging_for(target)
    again.mkdir()
    (again / "model.bin").write_bytes(b"late")
    real_rmtree = shutil.rmtree

    def removed_then_theirs(path, ignore_errors=False):
        real_rmtree(path, ignore_errors=ignore_errors)
        if Path(path) == target:
            os.replace(theirs, target)

    monkeypatch.setattr(shutil, "rmtree", removed_then_theirs)
    put_folder(again, target)  # no error: theirs is whole
    monkeypatch.undo()
    assert (target / "model.bin").read_bytes() == b"theirs"


def test_the_suite_runs_a_worker_per_core_unless_told(monkeypatch) -> None:
    monkeypatch.setattr(cli, "nproc", lambda: 2)
    assert cli.test_workers(["-q"]) == ["-n", "2", "--dist", "load", "-q"]
    assert cli.test_workers(["-n", "0", "-q"]) == ["-n", "0", "-q"]
    assert cli.test_workers(["-n3"]) == ["-n3"]
    assert cli.test_workers(["-p", "no:xdist"]) == ["-p", "no:xdist"]
    monkeypatch.setattr(cli, "nproc", lambda: 16)
    assert cli.test_workers([])[:2] == ["-n", "4"]
    monkeypatch.setattr(cli, "nproc", lambda: 1)
    assert cli.test_workers(["-q"]) == ["-q"]
