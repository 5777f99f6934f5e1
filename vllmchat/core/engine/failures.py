"""What llama.cpp's failures mean to the user: a load that failed (which memory ran
out, an unknown architecture, a damaged file) and a decode that failed."""

from __future__ import annotations

from collections.abc import Sequence

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.settings import LoadSettings


def classify_load_failure(
    lines: Sequence[str], settings: LoadSettings, stage: str, *, moe: bool = False
) -> EngineError:
    """What a failed load means: the architecture, memory for the weights or for the
    context, a damaged file, or llama.cpp's own words."""
    text = "\n".join(lines).lower()
    tail = " | ".join(line.strip() for line in lines[-3:] if line.strip())
    if "unknown model architecture" in text:
        arch = next(
            (ln.split("'")[1] for ln in lines if "unknown model architecture" in ln and "'" in ln),
            "?",
        )
        return EngineError(ErrorKind.UNSUPPORTED_ARCH, f"Architecture '{arch}' is not supported.")
    oom = any(
        w in text
        for w in (
            "out of memory",
            "failed to allocate",
            "unable to allocate",
            "cudamalloc failed",
            "alloc_tensor_range",
        )
    )
    if stage == "model" and oom:
        place = settings.placement
        if (place.n_cpu_moe > 0 or moe) and place.n_gpu_layers != 0:
            return EngineError(
                ErrorKind.OOM_LOAD,
                f"Not enough memory for the weights (n_gpu_layers={place.n_gpu_layers}, "
                f"experts of {place.n_cpu_moe} layers in RAM).",
                "Put the experts of more layers on the CPU (raise n_cpu_moe), "
                "or pick a smaller quant.",
            )
        return EngineError(
            ErrorKind.OOM_LOAD,
            f"Not enough memory for the weights (n_gpu_layers={place.n_gpu_layers}).",
        )
    if stage == "context":
        return EngineError(
            ErrorKind.OOM_GENERATE,
            f"Not enough memory for the KV cache and "
            f"compute buffers at n_ctx={settings.n_ctx}. {tail}".strip(),
        )
    if any(w in text for w in ("tensor", "data is not within", "corrupted", "invalid")):
        return EngineError(ErrorKind.CORRUPT, f"llama.cpp could not read the model: {tail}")
    return EngineError(ErrorKind.INTERNAL, f"llama.cpp failed to load the model: {tail}")


def decode_error(message: str, n_tokens: int, n_ctx: int) -> EngineError:
    """What ``llama_decode``'s return code (the end of ``message``) means."""
    code = message.rsplit(" ", 1)[-1]
    if code == "2":
        return EngineError(ErrorKind.INTERNAL, "aborted")
    if code == "1":
        return EngineError(
            ErrorKind.CONTEXT_FULL,
            f"No room left in the KV cache ({n_tokens} of {n_ctx} tokens used).",
        )
    if code in ("-2", "-3"):
        return EngineError(
            ErrorKind.OOM_GENERATE, "Out of memory for the compute buffers while generating."
        )
    return EngineError(ErrorKind.INTERNAL, f"llama.cpp failed to decode ({message}).")
