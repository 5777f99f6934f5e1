"""The app's folders as platformdirs names them, for this machine or another OS.

platformdirs comes from the virtual environment when it is there, else from the
copy pip vendors (``pip._vendor.platformdirs``: every Python that can make a venv
has it), so the plan runs before the venv exists. For another OS the folders are
computed with that OS's platformdirs class under a placeholder home (``~`` on Linux
and macOS, ``%LOCALAPPDATA%`` / ``%APPDATA%`` on Windows).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path, PureWindowsPath
from types import ModuleType
from typing import Any

APP = "vllmchat"
_OVERRIDES = {
    "data": "VLLMCHAT_DATA_DIR",
    "cache": "VLLMCHAT_CACHE_DIR",
    "config": "VLLMCHAT_CONFIG_DIR",
    "log": "VLLMCHAT_LOG_DIR",
    "models": "VLLMCHAT_MODELS_DIR",
    "wheels": "VLLMCHAT_WHEEL_CACHE",
}
_HOME = "/placeholder-home"  # absolute (platformdirs ignores a relative HOME); shown as ~
_PLACEHOLDERS = {
    "HOME": _HOME,
    "LOCALAPPDATA": "%LOCALAPPDATA%",
    "APPDATA": "%APPDATA%",
    "USERPROFILE": "%USERPROFILE%",
}


def platformdirs_module(name: str = "") -> ModuleType:
    """``platformdirs`` (or its submodule ``name``), else pip's vendored copy."""
    suffix = f".{name}" if name else ""
    try:
        return importlib.import_module("platformdirs" + suffix)
    except ImportError:
        return importlib.import_module("pip._vendor.platformdirs" + suffix)


def _dirs_class(sys_platform: str) -> Any:
    if sys_platform == "win32":
        return platformdirs_module("windows").Windows
    if sys_platform == "darwin":
        return platformdirs_module("macos").MacOS
    return platformdirs_module("unix").Unix


def _placeholder_win_folder(csidl_name: str) -> str:
    """Windows' known folders as placeholders (platformdirs asks the OS on Windows)."""
    name = {"CSIDL_APPDATA": "APPDATA", "CSIDL_LOCAL_APPDATA": "LOCALAPPDATA"}.get(csidl_name)
    return f"%{name}%" if name else f"%USERPROFILE%\\{csidl_name.removeprefix('CSIDL_')}"


@contextlib.contextmanager
def _placeholder_home() -> Iterator[None]:
    """A placeholder home, no XDG folders and Windows' folders as placeholders, while
    the folders of another OS are computed; everything is restored after."""
    saved = dict(os.environ)
    windows: Any = platformdirs_module("windows")
    resolver = windows.get_win_folder
    try:
        for key in [k for k in os.environ if k.startswith("XDG_")]:
            del os.environ[key]
        os.environ.update(_PLACEHOLDERS)
        windows.get_win_folder = _placeholder_win_folder
        yield
    finally:
        windows.get_win_folder = resolver
        os.environ.clear()
        os.environ.update(saved)


def _folders(dirs: Any) -> dict[str, str]:
    data = str(dirs.user_data_dir)
    cache = str(dirs.user_cache_dir)
    return {
        "data": data,
        "cache": cache,
        "config": str(dirs.user_config_dir),
        "log": str(dirs.user_log_dir),
        "models": os.path.join(data, "models"),
        "wheels": os.path.join(cache, "wheels"),
    }


def wheel_cache(env: dict[str, str] | None = None) -> Path:
    """Where built llama.cpp wheels are kept: ``VLLMCHAT_WHEEL_CACHE``, else on Linux
    ``${XDG_CACHE_HOME:-$HOME/.cache}/vllmchat/wheels`` (as the set-up always kept
    them), else the OS's cache folder's ``wheels``."""
    env = dict(os.environ) if env is None else env
    if env.get("VLLMCHAT_WHEEL_CACHE"):
        return Path(env["VLLMCHAT_WHEEL_CACHE"])
    if os.name == "posix" and not _is_macos():
        base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME", "~"), ".cache")
        return Path(base) / APP / "wheels"
    return Path(_folders(_dirs_class(_sys_platform())(appname=APP))["wheels"])


def _sys_platform() -> str:
    import sys

    return sys.platform


def _is_macos() -> bool:
    return _sys_platform() == "darwin"


def folders(sys_platform: str, *, injected: bool) -> dict[str, str]:
    """data, cache, config, log, models and wheels folders for ``sys_platform``: this
    machine's (its ``VLLMCHAT_*`` overrides applied), or with a placeholder home."""
    if not injected:
        found = _folders(_dirs_class(sys_platform)(appname=APP))
        found["wheels"] = str(wheel_cache())
        for key, var in _OVERRIDES.items():
            found[key] = os.environ.get(var) or found[key]
        return found
    with _placeholder_home():
        found = _folders(_dirs_class(sys_platform)(appname=APP))
    if sys_platform == "win32":
        return {k: str(PureWindowsPath(v)) for k, v in found.items()}
    return {k: "~" + v.removeprefix(_HOME) if v.startswith(_HOME) else v for k, v in found.items()}
