"""llama.cpp's shared libraries in llama-cpp-python's folder, by the platform's names.

The names follow llama-cpp-python's own loader (``llama_cpp/_ctypes_extensions.py``):
``lib<name>.so`` on Linux and FreeBSD, ``lib<name>.dylib`` (or ``.so``) on macOS,
``<name>.dll`` (or ``lib<name>.dll``) on Windows. The folder is found without
importing ``llama_cpp``; ``LLAMA_CPP_LIB_PATH`` overrides it, as it does for the loader.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def library_names(name: str, platform: str = sys.platform) -> tuple[str, ...]:
    """The file names of llama.cpp's library ``name`` ("ggml", "ggml-base", "llama",
    "mtmd") on ``platform`` (a ``sys.platform`` value), the usual one first."""
    if platform == "darwin":
        return (f"lib{name}.dylib", f"lib{name}.so")
    if platform in ("win32", "cygwin"):
        return (f"{name}.dll", f"lib{name}.dll")
    return (f"lib{name}.so",)  # Linux, FreeBSD and the other ELF systems


def llama_lib_dir() -> Path | None:
    """The folder llama-cpp-python loads its libraries from (None when it is not installed)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override)
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def llama_library(name: str, *, folder: Path | None = None, platform: str = sys.platform) -> Path:
    """The path of llama.cpp's library ``name``: the first of the platform's names that
    exists in ``folder`` (llama-cpp-python's by default), else the usual name there.

    Raises ``FileNotFoundError`` when llama-cpp-python is not installed; a missing
    file shows when the path is loaded (``ctypes.CDLL`` raises ``OSError``)."""
    folder = folder if folder is not None else llama_lib_dir()
    if folder is None:
        raise FileNotFoundError("llama-cpp-python is not installed")
    names = library_names(name, platform)
    return next((folder / n for n in names if (folder / n).exists()), folder / names[0])
