"""Tensor buffer-type overrides for llama.cpp's loader: expert tensors kept in RAM.

llama.cpp reads ``llama_model_params.tensor_buft_overrides``, a NULL-terminated
array of ``{regex, buffer type}``; the first pattern that matches a tensor's
name decides where it lives. ``--n-cpu-moe N`` is one pattern per layer
``0..N-1`` with the CPU buffer type. llama-cpp-python declares the field as an
untyped pointer and never sets it, so the array is built here and handed to the
loader by ``llama_adapter.loader_overrides``; it is kept alive as long as the model.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llama_cpp  # noqa: F401  (its loader loads ggml first, with its search paths set)

from vllmchat.core.machine.llama_libs import llama_library
from vllmchat.core.models.description import EXPERT_REGEX

_CPU_DEVICE = 0  # GGML_BACKEND_DEVICE_TYPE_CPU


class TensorBuftOverride(ctypes.Structure):
    """``struct llama_model_tensor_buft_override``."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def cpu_buffer_type() -> int:
    """ggml's CPU buffer type (the CPU device's default, ``ggml_backend_cpu_buffer_type()``)."""
    ggml = ctypes.CDLL(str(llama_library("ggml")))
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    ggml.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
    dev = ggml.ggml_backend_dev_by_type(_CPU_DEVICE)
    if not dev:
        raise RuntimeError("llama.cpp has no CPU device")
    buft = ggml.ggml_backend_dev_buffer_type(dev)
    if not buft:
        raise RuntimeError("llama.cpp's CPU device has no buffer type")
    return int(buft)


def expert_patterns(layers: Sequence[int]) -> list[str]:
    """One pattern per layer whose experts stay in RAM (llama.cpp's ``--n-cpu-moe``)."""
    return [f"blk\\.{i}{EXPERT_REGEX}" for i in layers]


class OverrideList:
    """A NULL-terminated ``tensor_buft_overrides`` array and the strings it points to."""

    def __init__(self, patterns: Sequence[str], buft: int) -> None:
        self.patterns = list(patterns)
        self._strings = [p.encode("utf-8") for p in self.patterns]
        self.array = (TensorBuftOverride * (len(self._strings) + 1))()
        for i, text in enumerate(self._strings):
            self.array[i].pattern = text
            self.array[i].buft = buft
        self.array[len(self._strings)].pattern = None  # the terminator
        self.array[len(self._strings)].buft = None

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)


def cpu_overrides(n_cpu_moe: int, n_layer: int, extra: Sequence[str] = ()) -> OverrideList | None:
    """The overrides that keep the experts of the first ``n_cpu_moe`` layers, and the
    tensors ``extra``'s patterns match, in RAM."""
    patterns = expert_patterns(range(max(0, min(n_cpu_moe, n_layer)))) + list(extra)
    if not patterns:
        return None
    return OverrideList(patterns, cpu_buffer_type())
