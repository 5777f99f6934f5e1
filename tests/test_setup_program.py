"""The set-up program on Linux: its wheel cache and stamps (the ones ``setup.sh`` used),
no compiler, an interrupted build run again, and a checkout under spaces and accents.

The venv's pip is mocked (``tests/fake_venv.py``: a real llama.cpp build takes many
minutes); the edits, the stamps, the cache and the process handling are the real ones.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fake_venv import VERSION, WHEEL, fake_venv
from vllmchat.setup import batch_invariant
from vllmchat.setup.steps import cache_key

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def world(tmp_path):
    """A fake venv, an empty wheel cache, a log, and the environment that uses them."""
    env = {**os.environ, **fake_venv(tmp_path), "VLLMCHAT_BACKEND": "cpu"}
    env.pop("CMAKE_ARGS", None)
    return tmp_path, env


def _setup(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "scripts/setup.sh", "llama", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _log(tmp: Path) -> list[str]:
    log = tmp / "log"
    return log.read_text().splitlines() if log.exists() else []


def _want(env: dict[str, str]) -> str:
    """The stamp and cache key text, composed as setup.sh composed it (in sh)."""
    script = (
        'pyver=$("$VPY" -c \'import sys, platform; print(f"cp{sys.version_info[0]}'
        "{sys.version_info[1]}-{platform.machine()}\")')\n"
        'want="llama-cpp-python==$V cpu $pyver -DGGML_NATIVE=OFF -DLLAVA_BUILD=ON '
        'batch-invariant-$ID"\n'
        "printf '%s\\n' \"$want\"; printf '%s' \"$want\" | sha256sum | cut -c1-16\n"
    )
    shell_env = {**env, "VPY": sys.executable, "V": VERSION, "ID": batch_invariant.patch_id()}
    out = subprocess.run(
        ["sh", "-c", script], env=shell_env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert cache_key(out[0]) == out[1]
    return out[0]


def test_a_build_is_cached_and_stamped_with_setup_shs_key(world):
    tmp, env = world
    done = _setup(env)
    assert done.returncode == 0, done.stderr
    assert _log(tmp) == ["wheel CMAKE_ARGS=-DGGML_NATIVE=OFF -DLLAVA_BUILD=ON CUDACXX=", "install"]
    want = _want(env)
    assert (tmp / "venv" / ".vllmchat-llama").read_text() == want + "\n"
    assert (tmp / "wheels" / f"cpu-{cache_key(want)}" / WHEEL).read_text() == "built\n"
    assert _setup(env).returncode == 0 and len(_log(tmp)) == 2  # the stamp matches
    (tmp / "venv" / ".vllmchat-llama").unlink()
    assert _setup(env).returncode == 0 and _log(tmp)[2:] == ["install"]  # from the cache


def test_no_compiler_is_one_message_with_the_package_to_install(world):
    tmp, env = world
    bare = tmp / "bin"
    bare.mkdir()
    for tool in ("sh", "bash", "cp", "sleep", "cut", "sha256sum"):
        (bare / tool).symlink_to(shutil.which(tool))
    done = _setup({**env, "PATH": str(bare), "CC": "", "CXX": "", "PYTHON": sys.executable})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no C/C++ compiler" in done.stderr and "build-essential" in done.stderr
    assert not (tmp / "venv" / ".vllmchat-llama").exists()


def _ctrl_c_as_in_a_terminal() -> None:
    """A terminal's foreground command takes Ctrl+C (a background launcher may have
    left SIGINT ignored, and a child inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_build_leaves_nothing_half_done_and_a_second_run_finishes(world):
    tmp, env = world
    proc = subprocess.Popen(
        ["sh", "scripts/setup.sh", "llama"],
        cwd=ROOT,
        env={**env, "SLEEP": "60"},
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    deadline = time.monotonic() + 60
    while not _log(tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C in the terminal
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    assert "interrupted" in err and "run the same command again" in err
    assert not list((tmp / "wheels").rglob("*.whl")) and not list((tmp / "tmp").iterdir())
    assert not (tmp / "venv" / ".vllmchat-llama").exists()
    done = _setup(env)
    assert done.returncode == 0, done.stderr
    assert (tmp / "venv" / ".vllmchat-llama").read_text() == _want(env) + "\n"
    assert next((tmp / "wheels").rglob("*.whl")).read_text() == "built\n"


def test_a_checkout_under_spaces_and_accents_sets_up(world):
    tmp, env = world
    checkout = tmp / "Mes modèles" / "vllm chat ü"
    checkout.mkdir(parents=True)
    for part in ("vllmchat", "scripts"):
        shutil.copytree(ROOT / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", checkout)
    venv = checkout / ".venv dir é"
    shutil.copytree(tmp / "venv", venv)
    (checkout / "tmp ø").mkdir()
    places = {
        "VLLMCHAT_VENV": str(venv),
        "TMPDIR": str(checkout / "tmp ø"),
        "VLLMCHAT_WHEEL_CACHE": str(checkout / "wheels ü"),
    }
    done = _setup({**env, **places}, cwd=checkout)
    assert done.returncode == 0, done.stderr
    assert (venv / ".vllmchat-llama").read_text() == _want(env) + "\n"
    assert len(list((checkout / "wheels ü").rglob("*.whl"))) == 1
