"""The C/C++ compiler llama.cpp's build needs, found the way each OS provides it.

Linux and other Unix systems: ``cc`` and ``c++`` on PATH (or ``CC``/``CXX``).
macOS: the Xcode command-line tools (``xcode-select -p`` answers; ``/usr/bin/clang``
exists even without them and only offers to install them). Windows: a Visual
Studio (or its Build Tools) with the C++ tools, as ``vswhere`` reports it, which is
how CMake finds it; or ``cl`` on PATH in a developer prompt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

_VC_TOOLS = "Microsoft.VisualStudio.Component.VC.Tools.x86.x64"


def _answer(*cmd: str) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _which(env: dict[str, str], name: str) -> str | None:
    given = env.get(name.upper().replace("+", "X")) if name in ("cc", "c++") else None
    if given and shutil.which(given.split()[0], path=env.get("PATH")):
        return given
    return shutil.which(name, path=env.get("PATH"))


def find_compiler(system: str, env: dict[str, str] | None = None) -> str | None:
    """Where this machine's C/C++ compiler is (a path or a short description), or None."""
    env = dict(os.environ) if env is None else env
    if system == "windows":
        root = env.get("ProgramFiles(x86)") or env.get("ProgramFiles") or r"C:\Program Files (x86)"
        vswhere = Path(root) / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
        if vswhere.exists():
            found = _answer(
                str(vswhere),
                "-latest",
                "-products",
                "*",
                "-requires",
                _VC_TOOLS,
                "-property",
                "installationPath",
            )
            if found:
                return found.splitlines()[0]
        return shutil.which("cl", path=env.get("PATH"))
    if system == "darwin":
        return _answer("xcode-select", "-p")
    cc = _which(env, "cc") or shutil.which("gcc", path=env.get("PATH"))
    cxx = _which(env, "c++") or shutil.which("g++", path=env.get("PATH"))
    return cxx if cc and cxx else None
