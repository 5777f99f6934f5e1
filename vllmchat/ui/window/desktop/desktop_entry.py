"""``vllmchat --install-desktop``: a freedesktop menu entry and icon for this user."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from vllmchat.core.resources import resource_path


def launcher_command() -> str:
    """How the desktop starts this installation of vllmchat."""
    if getattr(sys, "frozen", False):
        return shlex.quote(sys.executable)
    script = Path(sys.executable).with_name("vllmchat")
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m vllmchat"


def install_desktop_entry(data_home: str | None = None) -> Path:
    """Write ``applications/vllmchat.desktop`` and the icon under ``$XDG_DATA_HOME``."""
    base = Path(data_home or os.environ.get("XDG_DATA_HOME") or Path.home() / ".local/share")
    icon_dir = base / "icons" / "hicolor" / "scalable" / "apps"
    icon_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(resource_path("icons/vllmchat.svg"), icon_dir / "vllmchat.svg")
    entry = resource_path("vllmchat.desktop").read_text(encoding="utf-8")
    entry = entry.replace("Exec=vllmchat", f"Exec={launcher_command()}")
    apps = base / "applications"
    apps.mkdir(parents=True, exist_ok=True)
    target = apps / "vllmchat.desktop"
    target.write_text(entry, encoding="utf-8")
    target.chmod(0o755)
    return target
