"""The PyInstaller bundle is built while the rest of the suite runs.

Building it is about a minute and a half of mostly one-core work, so when the bundle's
test is collected the build starts at once, at a lower priority, in a process of its
own (``packaging/build.sh``, as a user runs it), and the test runs last: it waits for
that build, then starts the bundle as ``packaging/smoke.sh`` does. Nothing of the
build is faked or skipped; only its wait overlaps the other tests.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST = "test_bundle_builds_and_answers_headless"
_KEY = pytest.StashKey["BundleBuild"]()


@dataclass
class BundleBuild:
    """The build started at collection: its process and its log."""

    process: subprocess.Popen[bytes]
    log: Path

    def wait(self, timeout: float) -> tuple[int, str]:
        """Its exit code and the end of its log, once it has finished."""
        code = self.process.wait(timeout)
        return code, self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def can_build() -> bool:
    return shutil.which("pyinstaller", path=str(Path(sys.executable).parent)) is not None


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bundle = [item for item in items if item.name == TEST]
    if not bundle or not can_build():
        return
    items[:] = [item for item in items if item.name != TEST] + bundle  # the build has longest
    log = Path(tempfile.mkstemp(prefix="vllmchat-bundle-", suffix=".log")[1])
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["nice", "-n", "10", "sh", str(ROOT / "packaging" / "build.sh")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )
    config.stash[_KEY] = BundleBuild(process, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    build = config.stash.get(_KEY, None)
    if build is not None:
        build.stop()


@pytest.fixture
def bundle_build(request: pytest.FixtureRequest) -> BundleBuild | None:
    """The bundle's build started at collection (None where PyInstaller is missing)."""
    return request.config.stash.get(_KEY, None)
