"""Moving a damaged database aside: never while another process has it open, and
never onto an existing file (each damaged copy keeps a name of its own)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from vllmchat.core.conversations.store.faults import InUse

SIDE_FILES = ("-wal", "-shm")
# SQLite's POSIX lock bytes: the pending, reserved and shared bytes of the database
# file, and the WAL locks with the dead-man switch of the -shm file (held while open).
_DB_LOCKS = (0x40000000, 512)
_SHM_LOCKS = (120, 9)


def family(path: Path) -> list[Path]:
    """The database and the side files SQLite keeps beside it."""
    return [Path(str(path) + side) for side in ("", *SIDE_FILES)]


def _openers(files: list[Path]) -> list[str]:
    """Processes (this one too) with one of ``files`` open, read from /proc (Linux)."""
    wanted = set()
    for file in files:
        with contextlib.suppress(OSError):
            st = file.stat()
            wanted.add((st.st_dev, st.st_ino))
    found: list[str] = []
    proc = Path("/proc")
    if not wanted or not proc.is_dir():
        return found
    for pid in (p for p in proc.iterdir() if p.name.isdigit()):
        with contextlib.suppress(OSError):
            for fd in (pid / "fd").iterdir():
                with contextlib.suppress(OSError):
                    st = fd.stat()
                    if (st.st_dev, st.st_ino) in wanted:
                        name = (pid / "comm").read_text().strip()
                        mine = pid.name == str(os.getpid())
                        found.append(f"process {pid.name}, {name}" + (", this one" if mine else ""))
                        break
    return found


@contextlib.contextmanager
def _locked(files: list[Path]) -> Iterator[None]:
    """SQLite's lock bytes of the database, held for the block; ``InUse`` when another
    process holds one (a connection in WAL mode holds them while it is open)."""
    try:
        import fcntl
    except ImportError:  # Windows: an open file cannot be renamed there anyway
        yield
        return
    fds: list[int] = []
    try:
        for file, (start, length) in zip(files, (_DB_LOCKS, _SHM_LOCKS), strict=False):
            try:
                fd = os.open(file, os.O_RDWR)
            except FileNotFoundError:
                continue
            fds.append(fd)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
            except OSError as exc:
                raise InUse(
                    "the damaged conversation database is locked by another program"
                ) from exc
        yield
    finally:
        for fd in fds:
            os.close(fd)


def unique_name(path: Path) -> Path:
    """``<name>.damaged-<date>-<time>.<microseconds>``, with ``-2``, ``-3``… added when
    that name (or one of its side files) is taken."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
    base = path.with_name(f"{path.name}.damaged-{stamp}")
    candidate, n = base, 1
    while any(p.exists() or p.is_symlink() for p in family(candidate)):
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _move(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, failing rather than replacing an existing file."""
    try:
        os.link(source, target)  # FileExistsError when taken: nothing is replaced
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if target.exists() or target.is_symlink():
            raise FileExistsError(str(target)) from None
        os.rename(source, target)
        return
    os.unlink(source)


def identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` names now (None: none)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def move_aside(path: Path, checked: tuple[int, int] | None) -> Path | None:
    """Move the database and its side files to a new ``.damaged-`` name; ``InUse``
    (nothing moved) while any other process has them open, and None when ``path``
    is no longer the ``checked`` file (another vllmchat moved it meanwhile)."""
    files = family(path)
    openers = _openers(files)
    if openers:
        raise InUse(f"the damaged conversation database is open in another program ({openers[0]})")
    with _locked(files):
        if identity(path) != checked:
            return None
        while True:
            target = unique_name(path)
            moved: list[tuple[Path, Path]] = []
            try:
                for source, dest in zip(files, family(target), strict=True):
                    if source.exists():
                        _move(source, dest)
                        moved.append((source, dest))
            except FileExistsError:  # taken meanwhile: put back, take the next name
                for source, dest in reversed(moved):
                    os.rename(dest, source)
                continue
            return target
