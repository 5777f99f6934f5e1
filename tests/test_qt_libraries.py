"""Qt's missing system libraries: read off ldd, named as packages, and told truly."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from vllmchat.audio.errors import INSTALL_VOICE, AudioUnavailable
from vllmchat.core.machine import qt_libraries
from vllmchat.core.machine.shared_libraries import (
    MissingLibraries,
    debian_package,
    library_in_error,
    linux_family,
    missing_libraries,
)

DATA = Path(__file__).parent / "data"
PULSE_ERROR = "libpulse.so.0: cannot open shared object file: No such file or directory"


def test_recorded_ldd_of_the_multimedia_plugin_names_libpulse0() -> None:
    ldd = (DATA / "ldd_ffmpegmediaplugin_no_pulse.txt").read_text()
    missing = MissingLibraries(missing_libraries(ldd))
    assert missing.sonames == ("libpulse.so.0",)
    assert missing.apt_packages == ("libpulse0",)
    assert missing.install_command("debian") == "sudo apt-get install libpulse0"
    assert missing.install_command("fedora") == "sudo dnf install 'libpulse.so.0()(64bit)'"
    assert missing.install_command("arch") == "sudo pacman -S $(pacman -Fq libpulse.so.0)"


@pytest.mark.parametrize(
    ("soname", "package"),
    [
        ("libxcb-cursor.so.0", "libxcb-cursor0"),
        ("libX11-xcb.so.1", "libx11-xcb1"),
        ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
        ("libdbus-1.so.3", "libdbus-1-3"),
        ("libglib-2.0.so.0", "libglib2.0-0"),
        ("libEGL.so.1", "libegl1"),
        ("libasound.so.2", "libasound2"),
        ("libgssapi_krb5.so.2", "libgssapi-krb5-2"),
        ("libz.so.1", "zlib1g"),
        ("libfoo.so", None),
    ],
)
def test_a_soname_names_its_debian_package_by_the_policy(soname, package) -> None:
    assert debian_package(soname) == package


def test_qt_own_libraries_say_reinstall_pyside(tmp_path) -> None:
    check = qt_libraries.QtLibraryCheck(
        "window", (tmp_path / "libqxcb.so",), {tmp_path / "libqxcb.so": ("libQt6XcbQpa.so.6",)}
    )
    assert not check.ok and check.missing.apt_packages == ()
    assert "reinstall PySide6" in check.advice("debian")


def test_the_os_release_names_the_family() -> None:
    assert linux_family("ID=ubuntu\nID_LIKE=debian\n") == "debian"
    assert linux_family('ID="fedora"\n') == "fedora"
    assert linux_family("ID=manjaro\nID_LIKE=arch\n") == "arch"
    assert linux_family("ID=alpine\n") == ""


def test_every_qt_file_the_app_loads_finds_its_libraries_after_setup() -> None:
    for check in qt_libraries.check_all():
        assert check.files and check.ok, check.advice()
    part = qt_libraries.check_part("audio")
    assert any(f.name == "libffmpegmediaplugin.so" for f in part.files)


def test_the_checked_modules_are_the_ones_the_source_imports() -> None:
    root = Path(qt_libraries.__file__).parents[2]
    imported: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("PySide6.Qt"):
                imported.add(node.module.split(".")[1])  # type: ignore[union-attr]
    checked = {m for modules in qt_libraries.QT_MODULES.values() for m in modules}
    assert imported - {"QtTest"} <= checked


def test_a_missing_system_library_is_named_not_the_voice_extra() -> None:
    error = AudioUnavailable.from_import_error(ImportError(PULSE_ERROR))
    assert error.missing_library == "libpulse.so.0" == library_in_error(PULSE_ERROR)
    assert str(error).startswith("Qt Multimedia cannot load libpulse.so.0 (install ")
    assert INSTALL_VOICE not in str(error)
    if linux_family() == "debian":
        assert str(error) == (
            "Qt Multimedia cannot load libpulse.so.0 (install libpulse0: "
            "sudo apt-get install libpulse0)"
        )
    plain = AudioUnavailable.from_import_error(ModuleNotFoundError("No module named 'x'"))
    assert str(plain) == INSTALL_VOICE and not plain.missing_library


def test_importing_audio_without_its_library_raises_the_true_cause() -> None:
    """A real import of the audio layer where Qt Multimedia's load fails as ld.so does."""
    code = (
        "import sys, importlib.abc\n"
        "class Gone(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'PySide6.QtMultimedia':\n"
        f"            raise ImportError({PULSE_ERROR!r})\n"
        "sys.meta_path.insert(0, Gone())\n"
        "from vllmchat.audio.checks import device_findings\n"
        "[f] = device_findings()\n"
        "print(f.status.value, f.detail)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Qt Multimedia cannot load libpulse.so.0" in done.stdout
    assert "voice]" not in done.stdout and done.stdout.startswith("warn")
