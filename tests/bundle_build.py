"""The PyInstaller bundle is built while the rest of the suite runs.

Building it is about a minute and a half of mostly one-core work, so when the bundle's
test is collected the build starts at once, in a process of its own
(``packaging/build.sh``, as a user runs it), and the test runs last: it waits for that
build, then starts the bundle as ``packaging/smoke.sh`` does. Nothing of the build is
faked or skipped; only its wait overlaps the other tests.

Run alone, the suite leaves a core idle much of the time and the build takes it at a
lower priority. Under pytest-xdist the workers keep every core busy, so the build runs
at their priority and takes its share (a lower one would leave it all for the end);
the controller starts it once, and the worker that gets the test reads its end from
the files the build leaves: its log and its exit code.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST = "test_bundle_builds_and_answers_headless"
FOLDER_ENV = "VLLMCHAT_TEST_BUNDLE_BUILD"  # where the build leaves its log and exit code
_KEY = pytest.StashKey[subprocess.Popen[bytes]]()


@dataclass
class BundleBuild:
    """The build started at collection, seen through the files it leaves."""

    folder: Path

    def wait(self, timeout: float) -> tuple[int, str]:
        """Its exit code and the end of its log, once it has finished."""
        code_file = self.folder / "code"
        deadline = time.monotonic() + timeout
        while not code_file.is_file() or not code_file.read_text().strip():
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("packaging/build.sh", timeout)
            time.sleep(0.5)
        log = (self.folder / "log").read_text(errors="replace")[-3000:]
        return int(code_file.read_text()), log


def can_build() -> bool:
    return shutil.which("pyinstaller", path=str(Path(sys.executable).parent)) is not None


def _start(config: pytest.Config, folder: Path, *, nice: int) -> None:
    """Start the build, its output to ``folder``/log, its exit code to ``folder``/code."""
    log, code = folder / "log", folder / "code"
    script = f'sh packaging/build.sh > "{log}" 2>&1; echo $? > "{code}.n"; mv "{code}.n" "{code}"'
    config.stash[_KEY] = subprocess.Popen(
        ["nice", "-n", str(nice), "sh", "-c", script],
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        start_new_session=True,  # stopped with everything it started
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _is_worker(config) and FOLDER_ENV not in os.environ:
        os.environ[FOLDER_ENV] = tempfile.mkdtemp(prefix="vllmchat-bundle-")  # workers inherit


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bundle = [item for item in items if item.name == TEST]
    if not bundle:
        return
    items[:] = [item for item in items if item.name != TEST] + bundle  # the build has longest
    if not _is_worker(config) and can_build():
        _start(config, Path(os.environ[FOLDER_ENV]), nice=10)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """The controller under pytest-xdist: start the build once a worker has collected
    the bundle's test."""
    config: pytest.Config = node.config  # type: ignore[attr-defined]
    started = config.stash.get(_KEY, None) is not None
    if not started and any(i.endswith("::" + TEST) for i in ids) and can_build():
        _start(config, Path(os.environ[FOLDER_ENV]), nice=0)


def pytest_unconfigure(config: pytest.Config) -> None:
    process = config.stash.get(_KEY, None)
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    folder = os.environ.get(FOLDER_ENV)
    if folder and not _is_worker(config):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def bundle_build() -> BundleBuild | None:
    """The bundle's build started at collection (None where PyInstaller is missing)."""
    return BundleBuild(Path(os.environ[FOLDER_ENV])) if can_build() else None
