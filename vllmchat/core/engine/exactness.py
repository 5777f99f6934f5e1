"""Whether a verified batch gives its rows exactly the logits of single steps.

Speculation keeps greedy output token for token only where it does. That depends
on the llama.cpp build (vllmchat's set-up patches its kernels batch-invariant:
``setup/batch_invariant.py``) and on where the model runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuildMarker:
    """What vllmchat's set-up wrote into this llama.cpp build (``setup/batch_invariant.py``):
    the kernels it keeps batch-invariant, and the verify-row limits measured for them."""

    covers: frozenset[str] = frozenset()  # "cpu", "cuda", "swa_ring"; empty: another build
    verify_rows_exact: int = 0  # most tokens one exact verify holds
    verify_rows_gpu: int = 0  # most columns CUDA's matrix-vector kernel takes


@dataclass(frozen=True)
class KernelSetup:
    """What of a loaded model decides whether its verifies are exact."""

    gpu_layers: bool  # any layer (or the output) on a GPU
    backends: tuple[str, ...]  # ggml's registered backends, e.g. ("CUDA", "CPU")
    flash_attn: bool
    moe: bool
    swa_ring: bool  # sliding-window layers keep only the window (swa_full off)
    compute: tuple[tuple[int, int], ...] = ()  # the NVIDIA GPUs' compute capabilities


@dataclass(frozen=True)
class Exactness:
    """The answer, with the reason when it is no."""

    exact: bool
    reason: str = ""
    max_batch: int = 0  # most rows a verify may have (0: no limit)


def exactness(build: BuildMarker, at: KernelSetup) -> Exactness:
    """Exact verifies for this build on this kernel setup, or why not."""
    covers = build.covers
    if "cpu" not in covers:
        return Exactness(False, "this llama.cpp build is not vllmchat's batch-invariant one")
    if at.swa_ring and "swa_ring" not in covers:
        return Exactness(False, "a sliding-window ring fills its cells in another order")
    if not at.gpu_layers:
        return Exactness(True, max_batch=build.verify_rows_exact)
    gpu = [b for b in at.backends if b.upper() != "CPU" and b.upper() not in ("BLAS", "RPC")]
    if gpu != ["CUDA"] or "cuda" not in covers:
        return Exactness(False, f"the {'/'.join(gpu) or 'GPU'} kernels are not batch-invariant")
    if not at.compute or min(at.compute) < (7, 5) or (12, 1) in at.compute:
        # The patched kernel tables are Turing's and the generic one (Ampere and newer);
        # older GPUs and DGX Spark's GB10 choose others, and NVML may not tell.
        return Exactness(
            False,
            "the patched CUDA kernels cover NVIDIA GPUs from Turing on",
            build.verify_rows_gpu,
        )
    if not at.flash_attn:
        return Exactness(
            False, "on the GPU a verify is exact with flash attention only", build.verify_rows_gpu
        )
    if at.moe:
        return Exactness(
            False,
            "the GPU's expert kernel for several tokens is another one",
            build.verify_rows_gpu,
        )
    return Exactness(True, max_batch=build.verify_rows_exact)


def identity_note(exact: bool, reason: str, *, speculation: str, temperature: float) -> str:
    """A line for the user where speculation is on and greedy output may differ
    from plain decoding ("" where it cannot)."""
    if speculation == "off" or temperature > 0 or exact or not reason:
        return ""
    return f"Speculation: greedy replies can differ slightly from plain decoding here ({reason})."
