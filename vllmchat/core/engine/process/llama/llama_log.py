"""Capture llama.cpp's log in the engine process (errors and buffer sizes)."""

from __future__ import annotations

import ctypes
import re
from collections import deque
from typing import Any

import llama_cpp

_lines: deque[tuple[int, str]] = deque(maxlen=400)
_partial: list[str] = []
_count = 0
_DEBUG, _CONT = 1, 5  # ggml_log_level
_last_level = 2


def _on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    global _last_level
    if level != _CONT:
        _last_level = level
    piece = text.decode("utf-8", errors="replace")
    if _last_level == _DEBUG and "buffer type overridden" not in piece:
        return
    _partial.append(piece)
    if piece.endswith("\n"):
        global _count
        _lines.append((_count, "".join(_partial).rstrip("\n")))
        _count += 1
        _partial.clear()


_CALLBACK = llama_cpp.llama_log_callback(_on_log)  # kept alive for llama.cpp


def install() -> None:
    """Route llama.cpp's log into a ring buffer (replacing llama-cpp-python's printer)."""
    llama_cpp.llama_log_set(_CALLBACK, ctypes.c_void_p(0))


def mark() -> int:
    """A position to read new lines from."""
    return _count


def lines_since(position: int = 0, until: int | None = None) -> list[str]:
    """Log lines appended since ``mark()`` returned ``position`` (and before ``until``)."""
    end = _count if until is None else until
    return [line for seq, line in list(_lines) if position <= seq < end]


_BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|compute) buffer size\s*=\s*([\d.]+) MiB")


def buffer_sizes(lines: list[str]) -> dict[str, float]:
    """Sum of the model / KV / compute buffer sizes (MiB) that llama.cpp reported, per device."""
    sizes: dict[str, float] = {}
    for line in lines:
        m = _BUFFER_RE.search(line)
        if m:
            key = f"{m.group(2).lower()}:{m.group(1)}"
            sizes[key] = sizes.get(key, 0.0) + float(m.group(3))
    return sizes


_CLIP_BACKEND_RE = re.compile(r"CLIP using (\S+) backend")
_CLIP_MODEL_RE = re.compile(r"model size:\s*([\d.]+) MiB")
_CLIP_COMPUTE_RE = re.compile(r"(\S+) compute buffer size\s*=\s*([\d.]+) MiB")


def projector_buffer_sizes(lines: list[str]) -> dict[str, float]:
    """The projector's weights and its encoder's compute buffers (MiB) as mtmd's
    ``clip`` reported them, keyed ``projector model:DEVICE`` / ``projector compute:DEVICE``."""
    sizes: dict[str, float] = {}
    device = "CPU"
    for line in lines:
        if m := _CLIP_BACKEND_RE.search(line):
            device = m.group(1)
        elif m := _CLIP_MODEL_RE.search(line):
            sizes[f"projector model:{device}"] = float(m.group(1))
        elif m := _CLIP_COMPUTE_RE.search(line):
            key = f"projector compute:{m.group(1)}"
            sizes[key] = float(m.group(2))  # a later reserve replaces an earlier one
    return sizes


_OVERRIDE_RE = re.compile(r"tensor (\S+) \(.*\) buffer type overridden to (\S+)")


def overridden_tensors(lines: list[str]) -> dict[str, str]:
    """Tensors the loader placed by an override, and the buffer type it chose."""
    out: dict[str, str] = {}
    for line in lines:
        m = _OVERRIDE_RE.search(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def install_mtmd(mtmd: Any) -> None:
    """Route the multimodal library's log (its errors: a refused projector) here too."""
    # The helper's setter also sets the library's own (mtmd_helper_log_set calls
    # mtmd_log_set): both print to stderr otherwise.
    mtmd.mtmd_helper_log_set(_CALLBACK, ctypes.c_void_p(0))
