"""Can Qt's platform plugin load here? Read with ``ldd``, without loading Qt.

When no platform plugin can load, Qt aborts the process ("Could not load the Qt
platform plugin"); checking the plugin's shared libraries first lets the app
say which are missing, how to install them, and carry on as the terminal chat.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.machine.shared_libraries import MissingLibraries, missing_libraries

_PLUGIN_FILES = {"xcb": "libqxcb.so", "wayland": "libqwayland-generic.so"}


@dataclass(frozen=True)
class PluginCheck:
    """One platform plugin: where it is and which of its shared libraries are missing."""

    platform: str
    plugin: Path | None
    missing: tuple[str, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.plugin is not None and not self.missing and not self.error

    @property
    def libraries(self) -> MissingLibraries:
        return MissingLibraries(self.missing)

    @property
    def apt_packages(self) -> tuple[str, ...]:
        return self.libraries.apt_packages

    def advice(self) -> str:
        """What is wrong and the one thing to do about it."""
        if self.ok:
            return ""
        if self.plugin is None:
            return self.error or f"Qt's {self.platform} platform plugin was not found."
        if self.error:
            return f"Qt's {self.platform} plugin cannot be checked: {self.error}"
        text = (
            f"Qt's {self.platform} platform plugin cannot load: missing {', '.join(self.missing)}."
        )
        if self.libraries.system:
            text += f" Install them: {self.libraries.install_command()}"
        if self.libraries.qt_own:
            text += " Qt's own libraries are missing: reinstall PySide6 (scripts/setup.sh)."
        return text


def plugin_dir() -> Path | None:
    """Qt's platform plugin folder: ``QT_QPA_PLATFORM_PLUGIN_PATH`` or PySide6's own."""
    if os.environ.get("QT_QPA_PLATFORM_PLUGIN_PATH"):
        return Path(os.environ["QT_QPA_PLATFORM_PLUGIN_PATH"])
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins" / "platforms"


def check_plugin(platform: str = "xcb", folder: Path | None = None) -> PluginCheck:
    """Check one platform plugin's shared libraries with ``ldd``."""
    folder = folder or plugin_dir()
    plugin = folder / _PLUGIN_FILES.get(platform, f"libq{platform}.so") if folder else None
    if plugin is None or not plugin.exists():
        return PluginCheck(
            platform,
            None,
            error=f"Qt's {platform} plugin is not installed ({plugin or 'PySide6 not found'}).",
        )
    if not shutil.which("ldd"):
        return PluginCheck(platform, plugin, error="ldd is not available")
    done = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=False)
    return PluginCheck(platform, plugin, missing_libraries(done.stdout + done.stderr))


def candidate_platforms(env: dict[str, str] | None = None) -> list[str]:
    """The platforms Qt would try here, first choice first."""
    env = dict(os.environ) if env is None else env
    forced = env.get("QT_QPA_PLATFORM", "")
    if forced:
        return [p.split(":")[0] for p in forced.split(";") if p.strip()]
    platforms = []
    if env.get("WAYLAND_DISPLAY"):
        platforms.append("wayland")
    if env.get("DISPLAY"):
        platforms.append("xcb")
    return platforms


def window_blocker(env: dict[str, str] | None = None) -> str | None:
    """Why no window can open here (no display, no loadable plugin), or None when one can."""
    if not sys.platform.startswith("linux"):
        return None
    platforms = candidate_platforms(env)
    if not platforms:
        return "No display here (neither X11 nor Wayland)."
    checks = [check_plugin(p) for p in platforms if p in _PLUGIN_FILES]
    if not checks or any(c.ok for c in checks):
        return None
    return " ".join(c.advice() for c in checks)
