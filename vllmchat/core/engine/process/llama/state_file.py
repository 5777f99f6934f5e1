"""KV state files: llama.cpp state bytes plus token ids, bound to a model and settings."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllmchat.core.engine.events import EngineError, ErrorKind

MAGIC = b"VLLMCHAT-KV\x00"
VERSION = 1


@dataclass(frozen=True)
class KVState:
    """A saved KV cache: what it is bound to, its tokens and llama.cpp's bytes."""

    binding: dict[str, Any]
    tokens: list[int]
    data: bytes | bytearray


def write_state(path: str | os.PathLike[str], state: KVState) -> int:
    """Write atomically; returns the file size."""
    header = json.dumps(
        {
            "version": VERSION,
            "binding": state.binding,
            "tokens": state.tokens,
            "sha256": hashlib.sha256(state.data).hexdigest(),
            "n_bytes": len(state.data),
        }
    ).encode()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kv-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + struct.pack("<I", len(header)) + header)
            fh.write(state.data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target.stat().st_size


def read_state(path: str | os.PathLike[str], *, expect: dict[str, Any] | None = None) -> KVState:
    """Read a state file; refuse it when its binding differs from ``expect``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"Cannot read state file: {exc}") from exc
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + 4:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"{p.name} is not a vllmchat KV state file.")
    (n,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(raw[start : start + n])
    except ValueError as exc:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"{p.name} has a damaged header.") from exc
    data = raw[start + n :]
    if header.get("version") != VERSION:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"{p.name} has an unknown version.")
    if len(data) != header["n_bytes"] or hashlib.sha256(data).hexdigest() != header["sha256"]:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"{p.name} is damaged (checksum).")
    binding = header["binding"]
    if expect is not None:
        diff = sorted(k for k in set(binding) | set(expect) if binding.get(k) != expect.get(k))
        if diff:
            raise EngineError(
                ErrorKind.STATE_MISMATCH,
                f"The saved state was made with another {', '.join(diff)}; it was not loaded.",
            )
    return KVState(binding, list(header["tokens"]), data)
