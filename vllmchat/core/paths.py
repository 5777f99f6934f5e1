"""Where vllmchat keeps models, caches and data (platformdirs)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import platformdirs

APP = "vllmchat"


def _dir(env: str, default: str) -> Path:
    path = Path(os.environ.get(env) or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Rebuildable data: the demo model, saved KV states."""
    return _dir("VLLMCHAT_CACHE_DIR", platformdirs.user_cache_dir(APP))


def data_dir() -> Path:
    """User data: conversations."""
    return _dir("VLLMCHAT_DATA_DIR", platformdirs.user_data_dir(APP))


def config_dir() -> Path:
    """Settings."""
    return _dir("VLLMCHAT_CONFIG_DIR", platformdirs.user_config_dir(APP))


def models_dir() -> Path:
    """Models downloaded by the app."""
    return _dir("VLLMCHAT_MODELS_DIR", str(Path(platformdirs.user_data_dir(APP)) / "models"))


def kv_cache_dir() -> Path:
    return _dir("VLLMCHAT_KV_DIR", str(cache_dir() / "kv"))


def measurements_dir() -> Path:
    """What was measured on this machine: tuning results, quant quality, GPU overhead."""
    return _dir("VLLMCHAT_MEASUREMENTS_DIR", str(cache_dir() / "measured"))


def log_dir() -> Path:
    """The log file's folder; not made here (``machine.logs`` makes it, or falls back)."""
    return Path(os.environ.get("VLLMCHAT_LOG_DIR") or platformdirs.user_log_dir(APP))


def staging_for(target: Path) -> Path:
    """This process's own place to make ``target`` in before it is renamed into place:
    two processes making the same file or folder at once never share one."""
    return target.with_name(f"{target.name}.{os.getpid()}.partial")


def put_folder(staging: Path, target: Path) -> None:
    """Rename the folder ``staging`` to ``target``, replacing what was there; where another
    process has put its own there in between, that one stays."""
    shutil.rmtree(target, ignore_errors=True)
    try:
        os.replace(staging, target)
    except OSError:
        if not target.is_dir():
            raise
