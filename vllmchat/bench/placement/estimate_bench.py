"""``vllmchat bench estimate``: the memory estimate against what llama.cpp allocates.

llama.cpp logs the size of every model, KV and compute buffer it allocates;
this loads the demo model and synthetic GGUFs of real layer shapes (random
weights, quantized with llama.cpp) over several settings and compares.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from vllmchat.bench.synthetic.synth import Shape, write_llama_gguf
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.description import describe
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.settings import LoadSettings

SETTINGS: list[dict[str, Any]] = [
    dict(n_ctx=512),
    dict(n_ctx=4096),
    dict(n_ctx=8192, flash_attn=True),
    dict(n_ctx=4096, flash_attn=True, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=2048, n_ubatch=256, type_k="q4_0"),
    dict(n_ctx=4096, swa_full=True),
]
# Real per-layer shapes (TinyLlama 1.1B, Llama 3 8B) with fewer layers, to stay small.
SHAPES = {
    "tinyllama-shape-4L": Shape(2048, 4, 32, 4, 5632),
    "llama3-8b-shape-1L": Shape(4096, 1, 32, 8, 14336),
}


def _quantize(src: Path, dst: Path, ftype: int) -> Path:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params) != 0:
        raise RuntimeError(f"quantizing {src.name} failed")
    return dst


def _models(folder: Path, quick: bool) -> dict[str, Path]:
    from vllmchat.core.demo_model import gemma_model_path

    models = {"gemma-3-270m-Q4_K_M": gemma_model_path()}
    for name, shape in SHAPES.items():
        f16 = write_llama_gguf(folder / f"{name}-F16.gguf", shape, dtype="f16")
        models[f"{name}-Q4_K_M"] = _quantize(f16, folder / f"{name}-Q4_K_M.gguf", 15)
        if not quick:
            models[f"{name}-Q8_0"] = _quantize(f16, folder / f"{name}-Q8_0.gguf", 7)
            models[f"{name}-F16"] = f16
        if quick:
            break
    return models


def _measure(path: Path, overrides: dict[str, Any]) -> dict[str, float]:
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.llama import llama_log

    llama_log.install()
    keys = {k: v for k, v in overrides.items() if k != "n_ubatch"}
    rt = LlamaRuntime(
        LoadSettings(
            model_path=str(path), n_threads=2, n_ubatch=overrides.get("n_ubatch", 512), **keys
        )
    )
    try:
        buffers = rt.info.buffers_mib
    finally:
        rt.close()
    sums = {"model": 0.0, "kv": 0.0, "compute": 0.0}
    for key, mib in buffers.items():
        sums[key.split(":")[0]] += mib
    return sums


def _pct(est: float, real: float) -> float:
    return abs(est - real) / real * 100 if real else 0.0


def run(*, quick: bool = False) -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in _models(Path(tmp), quick).items():
            desc = describe(read_header(path))
            for overrides in SETTINGS[:3] if quick else SETTINGS:
                real = _measure(path, overrides)
                e = estimate(desc, FitSettings(gpu=False, **overrides))
                est = {
                    "model": (e.weights_cpu + e.weights_gpu) / MIB,
                    "kv": e.kv / MIB,
                    "compute": (e.compute_cpu + e.compute_gpu) / MIB,
                }
                total_real, total_est = sum(real.values()), sum(est.values())
                cases.append(
                    {
                        "model": name,
                        "settings": overrides,
                        "measured_mib": {k: round(v, 2) for k, v in real.items()},
                        "estimated_mib": {k: round(v, 2) for k, v in est.items()},
                        "error_pct": round(_pct(total_est, total_real), 3),
                        "component_error_pct": {k: round(_pct(est[k], real[k]), 2) for k in real},
                    }
                )
    return {
        "cases": len(cases),
        "max_abs_error_pct": max(c["error_pct"] for c in cases),
        "max_component_error_pct": {
            k: max(c["component_error_pct"][k] for c in cases) for k in ("model", "kv", "compute")
        },
        "gpu_note": "CPU build: every buffer is on the CPU; GPU splits follow the same sizes.",
        "details": cases,
    }
