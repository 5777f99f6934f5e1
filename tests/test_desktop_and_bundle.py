"""Double-click launch: the desktop entry, and the PyInstaller bundle starting headless."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_install_desktop_writes_a_valid_entry_and_icon(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "--install-desktop"],
        env={"XDG_DATA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    entry = tmp_path / "applications" / "vllmchat.desktop"
    assert Path(proc.stdout.strip()) == entry
    text = entry.read_text()
    assert "Exec=" in text and "vllmchat" in text.split("Exec=")[1].split("\n")[0]
    assert (tmp_path / "icons/hicolor/scalable/apps/vllmchat.svg").exists()
    validator = shutil.which("desktop-file-validate")
    if validator is None:
        pytest.skip("desktop-file-validate is not installed (scripts/setup.sh installs it)")
    check = subprocess.run([validator, str(entry)], capture_output=True, text=True)
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr


def test_startup_probe_shows_the_window(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "--exit-after-show"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "window shown" in proc.stderr


@pytest.mark.slow
def test_bundle_builds_and_answers_headless(bundle_build):
    """The bundle built by ``packaging/build.sh`` (started at collection, see
    ``tests/bundle_build.py``) prints its version and answers its self-test."""
    if bundle_build is None:
        pytest.skip("PyInstaller is not installed (it is in the dev extras)")
    code, log = bundle_build.wait(900)
    assert code == 0, log
    proc = subprocess.run(
        ["bash", str(ROOT / "packaging" / "smoke.sh")],
        env={**os.environ, "VLLMCHAT_BUNDLE_BUILT": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "vllmchat 0.1.0" in proc.stdout
    assert "self-test: ok" in proc.stdout


def test_without_a_display_the_app_falls_back_to_the_terminal_chat():
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "--model", "/nonexistent.gguf"],
        env=env,
        input="/quit\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "terminal chat" in proc.stderr
    assert proc.returncode == 2 and "Model file not found" in proc.stderr


def test_the_launcher_loads_no_qt_until_the_window_can_open():
    code = (
        "import sys, vllmchat.main, vllmchat.ui.window.launch\n"
        "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr
