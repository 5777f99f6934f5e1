"""Can Qt's platform plugin load here? Read with ``ldd``, without loading Qt.

When no platform plugin can load, Qt aborts the process ("Could not load the Qt
platform plugin"); checking the plugin's shared libraries first lets the app
say which are missing, how to install them, and carry on as the terminal chat.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Debian/Ubuntu packages of the libraries Qt 6's xcb platform plugin loads
# (read off ``dpkg -S`` for every library ``ldd`` lists for the plugin).
DEBIAN_PACKAGES = {
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libICE.so.6": "libice6",
    "libSM.so.6": "libsm6",
    "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
# Everything the xcb plugin needs on a bare Debian/Ubuntu desktop.
XCB_APT_PACKAGES = tuple(sorted({p for p in DEBIAN_PACKAGES.values() if "wayland" not in p}))
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
    def apt_packages(self) -> tuple[str, ...]:
        return tuple(sorted({DEBIAN_PACKAGES[m] for m in self.missing if m in DEBIAN_PACKAGES}))

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
        qt_own = [m for m in self.missing if m.startswith("libQt6")]
        if self.apt_packages:
            text += f" Install them: sudo apt-get install {' '.join(self.apt_packages)}"
        if qt_own:
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


def missing_libraries(ldd_output: str) -> tuple[str, ...]:
    """Library names ``ldd`` could not find."""
    return tuple(dict.fromkeys(re.findall(r"^\s*(\S+)\s*=>\s*not found", ldd_output, re.M)))


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
