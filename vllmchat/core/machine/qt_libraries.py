"""The Qt files this app loads, by what they are for, and the system libraries they lack.

Read with ``ldd`` from PySide6's folder, without importing Qt (a missing library
would abort or fail the import): the modules the app imports (``QT_MODULES``; a test
holds it to the imports in the source), the xcb platform plugin with its GL
integrations, and the plugin folders those modules load from (multimedia, image
formats, icon engines).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.machine.shared_libraries import MissingLibraries, ldd_missing

# The PySide6 modules imported by the app, and what each part of it needs.
QT_MODULES = {
    "window": ("QtCore", "QtGui", "QtWidgets", "QtSvg"),
    "audio": ("QtMultimedia",),
}
QT_PLUGINS = {
    "window": ("platforms/libqxcb.so", "xcbglintegrations", "imageformats", "iconengines"),
    "audio": ("multimedia",),
}
WHAT_FOR = {"window": "the window", "audio": "Qt Multimedia (the microphone and speakers)"}


def pyside_dir() -> Path | None:
    """PySide6's installed folder, or None where it is not installed."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def qt_files(part: str, pyside: Path) -> list[Path]:
    """The shared objects ``part`` ("window", "audio") loads: its modules and plugins."""
    files = [m for name in QT_MODULES[part] for m in sorted(pyside.glob(f"{name}.*.so"))]
    for plugin in QT_PLUGINS[part]:
        where = pyside / "Qt" / "plugins" / plugin
        if where.is_dir():
            files += sorted(where.glob("*.so"))
        elif where.exists():
            files.append(where)
    return files


@dataclass(frozen=True)
class QtLibraryCheck:
    """One part of the app: the Qt files checked and the libraries they cannot find."""

    part: str
    files: tuple[Path, ...]
    missing_by_file: dict[Path, tuple[str, ...]]

    @property
    def missing(self) -> MissingLibraries:
        names = (s for found in self.missing_by_file.values() for s in found)
        return MissingLibraries(tuple(dict.fromkeys(names)))

    @property
    def ok(self) -> bool:
        return bool(self.files) and not self.missing_by_file

    def advice(self, family: str | None = None) -> str:
        """What cannot load and the one thing to do about it ("" when all is there)."""
        if not self.files:
            return f"PySide6 is not installed, so {WHAT_FOR[self.part]} cannot run."
        missing = self.missing
        if not missing.sonames:
            return ""
        text = f"{WHAT_FOR[self.part]} cannot load {', '.join(missing.sonames)}"
        if missing.system:
            text += f": {missing.install_command(family)}"
        if missing.qt_own:
            text += "; Qt's own libraries are missing: reinstall PySide6 (scripts/setup.sh)"
        return text[0].upper() + text[1:]


def check_part(part: str, pyside: Path | None = None) -> QtLibraryCheck:
    """Check every Qt file ``part`` loads with ``ldd``."""
    pyside = pyside or pyside_dir()
    files = qt_files(part, pyside) if pyside else []
    return QtLibraryCheck(part, tuple(files), ldd_missing(files))


def check_all(pyside: Path | None = None) -> list[QtLibraryCheck]:
    """The window's and the audio's Qt files."""
    return [check_part(part, pyside) for part in QT_MODULES]
