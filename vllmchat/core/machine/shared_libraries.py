"""Shared libraries a program cannot load, read off ``ldd``, and the package that brings each.

No list of libraries is kept by hand: a library's Debian/Ubuntu package is named from
its soname by Debian's policy (``libfoo.so.1`` is in ``libfoo1``, ``libfoo2.so.1`` in
``libfoo2-1``), with the few names Debian spells otherwise; Fedora's ``dnf`` installs
by the soname itself and Arch's ``pacman -F`` finds its package, so those commands
need no table at all.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Libraries whose Debian package breaks the naming rule (checked with ``dpkg -S``).
_DEBIAN_NAMED_OTHERWISE = {
    "libglib-2.0": "libglib2.0-0",
    "libgobject-2.0": "libglib2.0-0",
    "libgio-2.0": "libglib2.0-0",
    "libgmodule-2.0": "libglib2.0-0",
    "libgthread-2.0": "libglib2.0-0",
    "libz": "zlib1g",
    "libjpeg": "libjpeg62-turbo",
}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.M)
_SONAME = re.compile(r"(lib[\w+.-]+?)\.so\.(\d+)(?:\.[\d.]+)?")
_CANNOT_OPEN = re.compile(r"(lib[\w+.-]+\.so[\d.]*): cannot open shared object file")


def missing_libraries(ldd_output: str) -> tuple[str, ...]:
    """Library names ``ldd`` could not find, each once, in the order it listed them."""
    return tuple(dict.fromkeys(_NOT_FOUND.findall(ldd_output)))


def library_in_error(message: str) -> str | None:
    """The library a failed load names ("libpulse.so.0: cannot open shared object file")."""
    found = _CANNOT_OPEN.search(message)
    return found.group(1) if found else None


def debian_package(soname: str) -> str | None:
    """The Debian/Ubuntu package that holds ``soname``, by Debian's naming policy."""
    found = _SONAME.fullmatch(soname)
    if found is None:
        return None
    name, major = found.groups()
    if name in _DEBIAN_NAMED_OTHERWISE:
        return _DEBIAN_NAMED_OTHERWISE[name]
    stem = name.lower().replace("_", "-")
    return f"{stem}-{major}" if stem[-1].isdigit() else f"{stem}{major}"


def is_qt_own(soname: str) -> bool:
    """One of Qt's own libraries, which PySide6 ships (reinstall it, no system package)."""
    return soname.startswith(("libQt6", "libpyside6", "libshiboken6"))


def linux_family(os_release: str | None = None) -> str:
    """ "debian", "fedora", "arch" or "" from ``/etc/os-release`` (its ID and ID_LIKE)."""
    if os_release is None:
        try:
            os_release = Path("/etc/os-release").read_text(encoding="utf-8")
        except OSError:
            return ""
    ids: list[str] = []
    for key in ("ID", "ID_LIKE"):
        found = re.search(rf"^{key}=\"?([^\"\n]*)\"?$", os_release, re.M)
        ids += found.group(1).split() if found else []
    for family, members in (
        ("debian", {"debian", "ubuntu"}),
        ("fedora", {"fedora", "rhel", "centos"}),
        ("arch", {"arch", "manjaro"}),
    ):
        if members & set(ids):
            return family
    return ""


@dataclass(frozen=True)
class MissingLibraries:
    """System libraries some of Qt's files cannot find, and how to install them."""

    sonames: tuple[str, ...]

    @property
    def system(self) -> tuple[str, ...]:
        return tuple(s for s in self.sonames if not is_qt_own(s))

    @property
    def qt_own(self) -> tuple[str, ...]:
        return tuple(s for s in self.sonames if is_qt_own(s))

    @property
    def apt_packages(self) -> tuple[str, ...]:
        found = (debian_package(s) for s in self.system)
        return tuple(sorted({p for p in found if p}))

    def install_command(self, family: str | None = None) -> str:
        """The one command that installs them on this Linux (Debian's when unknown)."""
        family = linux_family() if family is None else family
        if not self.system:
            return ""
        if family == "fedora":
            provides = " ".join(f"'{s}()(64bit)'" for s in self.system)
            return f"sudo dnf install {provides}"
        if family == "arch":
            return f"sudo pacman -S $(pacman -Fq {' '.join(self.system)})"
        return f"sudo apt-get install {' '.join(self.apt_packages)}"

    def other_systems(self) -> str:
        """Fedora's and Arch's commands, for a message read on any Linux."""
        return f"Fedora: {self.install_command('fedora')}; Arch: {self.install_command('arch')}"


def ldd_missing(files: list[Path]) -> dict[Path, tuple[str, ...]]:
    """Each file's libraries ``ldd`` cannot find (files missing nothing are left out).
    Empty where ``ldd`` is not there (not Linux, or a very bare system)."""
    if not files or shutil.which("ldd") is None:
        return {}
    found: dict[Path, tuple[str, ...]] = {}
    for file in files:
        done = subprocess.run(["ldd", str(file)], capture_output=True, text=True, check=False)
        missing = missing_libraries(done.stdout + done.stderr)
        if missing:
            found[file] = missing
    return found
