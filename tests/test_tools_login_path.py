"""The login shell's PATH: found, cached, and a hanging shell times out."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from vllmchat.core.tools import login_path


def _shell(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-shell"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_the_login_shells_path_is_read_between_markers(tmp_path: Path) -> None:
    """A real shell script stands in for the user's shell, printing profile noise first."""
    shell = _shell(
        tmp_path, 'echo "welcome to the profile"\nPATH=/opt/node/bin:/usr/bin\neval "$4"'
    )
    assert login_path.ask_shell(shell) == "/opt/node/bin:/usr/bin"


def test_a_hanging_shell_times_out(tmp_path: Path) -> None:
    shell = _shell(tmp_path, "sleep 30 &\nsleep 30")
    started = time.monotonic()
    assert login_path.ask_shell(shell, timeout_s=0.5) is None
    assert time.monotonic() - started < 5


def test_the_answer_is_cached_and_merged(tmp_path: Path, monkeypatch) -> None:
    calls = tmp_path / "calls"
    shell = _shell(tmp_path, f'echo x >> {calls}\nPATH=/from/login:/usr/bin\neval "$4"')
    monkeypatch.setenv("SHELL", shell)
    monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(login_path, "_cached", None)
    first = login_path.login_path()
    assert first.split(os.pathsep)[:2] == ["/from/login", "/usr/bin"]
    assert os.environ["PATH"].split(os.pathsep)[0] in first.split(os.pathsep)
    monkeypatch.setattr(login_path, "_cached", None)  # a new process: the file cache answers
    assert login_path.login_path() == first
    assert calls.read_text().count("x") == 1
