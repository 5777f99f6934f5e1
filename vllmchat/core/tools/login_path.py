"""The PATH of the user's login shell, so that ``npx`` and ``uvx`` are found from a double-click.

An app started from a desktop launcher, the Dock or an AppImage inherits the
session's minimal PATH, not the one the user's shell profile builds (nvm, Homebrew,
``~/.local/bin``). The login shell is asked once, with a timeout, in its own process
group (killed whole on timeout); the answer is cached in memory and on disk for a day.
Windows programs inherit the user's PATH already, so it is used as it is there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from vllmchat.core.paths import cache_dir

TIMEOUT_S = 5.0
CACHE_AGE_S = 24 * 3600.0
_BEGIN, _END = "__VLLMCHAT_PATH_BEGIN__", "__VLLMCHAT_PATH_END__"
_EXTRA_DIRS = ("~/.local/bin", "~/.cargo/bin", "/opt/homebrew/bin", "/usr/local/bin")
_lock = threading.Lock()
_cached: str | None = None


def _cache_file() -> Path:
    return cache_dir() / "login_path.json"


def ask_shell(shell: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """``$PATH`` as ``shell`` prints it as an interactive login shell, or None."""
    script = f'printf "%s%s%s" "{_BEGIN}" "$PATH" "{_END}"'
    try:
        proc = subprocess.Popen(
            [shell, "-i", "-l", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
    except OSError:
        return None
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=1.0)
        return None
    start, end = out.rfind(_BEGIN), out.rfind(_END)
    if start < 0 or end < start:
        return None
    return out[start + len(_BEGIN) : end] or None


def merge_paths(*paths: str) -> str:
    """Join PATH strings in order, each directory once."""
    seen: list[str] = []
    for path in paths:
        for entry in path.split(os.pathsep):
            if entry and entry not in seen:
                seen.append(entry)
    return os.pathsep.join(seen)


def _fallback() -> str:
    extra = [os.path.expanduser(d) for d in _EXTRA_DIRS]
    return merge_paths(os.environ.get("PATH", ""), *[d for d in extra if os.path.isdir(d)])


def _read_cache(shell: str) -> str | None:
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        isinstance(data, dict)
        and data.get("shell") == shell
        and isinstance(data.get("path"), str)
        and time.time() - float(data.get("at", 0)) < CACHE_AGE_S
    ):
        return str(data["path"])
    return None


def _write_cache(shell: str, path: str) -> None:
    with contextlib.suppress(OSError):
        _cache_file().write_text(
            json.dumps({"shell": shell, "path": path, "at": time.time()}), encoding="utf-8"
        )


def login_path(*, refresh: bool = False, timeout_s: float = TIMEOUT_S) -> str:
    """The PATH to start MCP servers with: the login shell's, then this process's own."""
    global _cached
    with _lock:
        if _cached is not None and not refresh:
            return _cached
        if sys.platform == "win32":
            _cached = os.environ.get("PATH", "")
            return _cached
        shell = os.environ.get("SHELL") or "/bin/sh"
        found = None if refresh else _read_cache(shell)
        if found is None:
            found = ask_shell(shell, timeout_s)
            if found is not None:
                _write_cache(shell, found)
        _cached = merge_paths(found or "", _fallback())
        return _cached
