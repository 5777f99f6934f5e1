"""Check a model file before handing it to llama.cpp, and explain what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.gguf_header import (
    CorruptGGUFError,
    GGUFHeader,
    NotGGUFError,
    read_header,
)


def check_model_file(path: str | os.PathLike[str]) -> GGUFHeader:
    """Return the file's GGUF header, or raise ``EngineError`` saying what is wrong."""
    p = Path(path)
    if not p.exists():
        raise EngineError(ErrorKind.MISSING_FILE, f"Model file not found: {p}")
    if not p.is_file():
        raise EngineError(ErrorKind.NOT_GGUF, f"Not a file: {p}")
    size = p.stat().st_size
    if size == 0:
        raise EngineError(ErrorKind.TRUNCATED, f"{p.name} is empty (0 bytes).")
    try:
        header = read_header(p)
    except NotGGUFError as exc:
        raise EngineError(ErrorKind.NOT_GGUF, f"{p.name} is not a GGUF model file.") from exc
    except CorruptGGUFError as exc:
        if "ends inside its header" in str(exc):
            raise EngineError(
                ErrorKind.TRUNCATED, f"{p.name} is cut off inside its header ({size:,} bytes)."
            ) from exc
        raise EngineError(ErrorKind.CORRUPT, f"{p.name} has a damaged header: {exc}.") from exc
    if size < header.data_end:
        raise EngineError(
            ErrorKind.TRUNCATED,
            f"{p.name} is truncated: {size:,} of {header.data_end:,} bytes "
            f"({100 * size / header.data_end:.1f}%).",
        )
    if not header.tensors:
        raise EngineError(ErrorKind.CORRUPT, f"{p.name} holds no tensors.")
    return header


def model_fingerprint(path: str | os.PathLike[str]) -> str:
    """A cheap identity of a model file: size plus a hash of its head and tail."""
    import hashlib

    p = Path(path)
    size = p.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with p.open("rb") as fh:
        digest.update(fh.read(1 << 20))
        fh.seek(max(0, size - (1 << 20)))
        digest.update(fh.read(1 << 20))
    return digest.hexdigest()[:32]
