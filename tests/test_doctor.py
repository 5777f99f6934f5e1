"""``vllmchat doctor`` on this CPU-only machine and on planted faults; Qt's runtime libraries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmchat.core.doctor.system_checks import LOW_DISK_BYTES
from vllmchat.core.machine import qt_runtime

ROOT = Path(__file__).resolve().parents[1]


def _doctor(*args: str, **env: str) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "vllmchat", "doctor", "--json", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, **env},
    )
    return done.returncode, json.loads(done.stdout)


def _by_key(report: dict) -> dict[str, dict]:
    return {f["key"]: f for f in report["findings"]}


@pytest.fixture
def broken_xcb_plugin(tmp_path) -> Path:
    """Qt's xcb plugin copied where its own Qt libraries cannot be found."""
    plugin = qt_runtime.check_plugin("xcb").plugin
    assert plugin is not None
    folder = tmp_path / "platforms"
    folder.mkdir()
    shutil.copy(plugin, folder / plugin.name)
    return folder


def test_doctor_on_this_cpu_machine_finds_nothing_to_fix(demo_model):
    code, report = _doctor()
    found = _by_key(report)
    assert code == 0 and report["chat_works"]
    assert [b["name"] for b in found["backends"]["data"]["backends"]] == ["CPU"]
    assert (
        found["machine"]["data"]["gpus"] == [] and found["machine"]["data"]["best_backend"] == "cpu"
    )
    assert "gpu_build" not in found and "offload" not in found
    assert found["cpu"]["status"] == "ok" and "portable" in found["cpu"]["detail"]
    assert found["chat"]["status"] == "ok" and found["chat"]["data"]["reply"].strip()
    low_disk = found["disk"]["data"]["free_bytes"] < LOW_DISK_BYTES
    assert found["disk"]["status"] == ("warn" if low_disk else "ok")  # this machine's real disk
    others = [f for f in report["findings"] if f["key"] != "disk"]
    assert all(f["status"] in ("ok", "info") for f in others), report


def test_doctor_names_an_unwritable_model_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, report = _doctor("--no-load", VLLMCHAT_MODELS_DIR=str(blocker / "models"))
    found = _by_key(report)["models_dir"]
    assert found["status"] == "warn" and "not writable" in found["detail"]
    assert "VLLMCHAT_MODELS_DIR" in found["fix"]
    assert code == 0  # chat itself still works


def test_doctor_names_the_log_file_and_a_log_folder_it_cannot_write(tmp_path):
    code, report = _doctor("--no-load", VLLMCHAT_LOG_DIR=str(tmp_path / "log"))
    found = _by_key(report)["log"]
    path = tmp_path / "log" / "vllmchat.log"
    assert found["status"] == "ok" and found["data"]["path"] == str(path) and path.is_file()
    assert str(path) in found["detail"] and code == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = subprocess.run(
        [sys.executable, "-m", "vllmchat", "doctor", "--no-load"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "VLLMCHAT_LOG_DIR": str(blocker / "log")},
    )
    assert done.returncode == 0  # the app runs on without its log file
    assert done.stderr.count("cannot be written") == 1 and "Traceback" not in done.stderr
    assert f"[WARN] Log file: {blocker / 'log'} cannot be written" in done.stdout
    assert "fix: make it writable, or choose another: export VLLMCHAT_LOG_DIR=" in done.stdout


def test_doctor_names_the_libraries_a_qt_plugin_lacks(broken_xcb_plugin):
    code, report = _doctor(
        "--no-load",
        QT_QPA_PLATFORM="xcb",
        DISPLAY=":99",
        QT_QPA_PLATFORM_PLUGIN_PATH=str(broken_xcb_plugin),
    )
    found = _by_key(report)["display"]
    assert found["status"] == "warn" and "libQt6XcbQpa.so.6" in found["data"]["missing"]
    assert "terminal chat" in found["detail"] and "reinstall PySide6" in found["fix"]
    assert code == 0


def test_ldd_finds_every_library_of_the_xcb_plugin_after_setup():
    check = qt_runtime.check_plugin("xcb")
    assert check.plugin is not None and check.missing == (), check.advice()


def test_missing_xcb_libraries_map_to_their_debian_packages():
    ldd = (
        "\tlibQt6XcbQpa.so.6 => /x/libQt6XcbQpa.so.6 (0x1)\n"
        "\tlibxcb-cursor.so.0 => not found\n\tlibxcb-icccm.so.4 => not found\n"
        "\tlibxcb-keysyms.so.1 => not found\n\tlibxcb-icccm.so.4 => not found\n"
    )
    missing = qt_runtime.missing_libraries(ldd)
    assert missing == ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1")
    check = qt_runtime.PluginCheck("xcb", Path("/x/libqxcb.so"), missing)
    assert check.apt_packages == ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1")
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in check.advice()


def test_without_a_loadable_plugin_the_app_explains_and_chats_in_the_terminal(broken_xcb_plugin):
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "xcb",
        "DISPLAY": ":99",
        "QT_QPA_PLATFORM_PLUGIN_PATH": str(broken_xcb_plugin),
    }
    done = subprocess.run(
        [sys.executable, "-m", "vllmchat"],
        input="Hello\n/quit\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "xcb platform plugin cannot load: missing libQt6XcbQpa.so.6" in done.stderr
    assert "Starting the terminal chat" in done.stderr
    assert "ai> " in done.stdout
