"""``vllmchat bench moe``: expert placement for a mixture-of-experts model.

On a GPU (``moe_gpu.py``): the tuner's pick against the placements at the edge of
the card, the pick and the best re-measured in alternation
(``pick_vs_best_ratio``), the estimate against the process's real VRAM, every
measured placement with the memory it left free; with ``--free-gib N`` another
process holds all but N GiB of each GPU first (``gpu_hold.py``); with
``--fit-args`` llama.cpp's own choice, with ``--full`` also the CPU figures below
and the best whole-layer placement (``moe_vs_layers_ratio``).

On any machine without a GPU: the estimate against llama.cpp's buffers at several
placements (``n_cpu_moe``), the override list as llama.cpp's loader reported it,
and a live reload between two placements (``reload_reprefilled_tokens``).

The model: ``--model``, or ``--shape`` (one of ``synth_moe.MOE_SHAPES``, written
once as Q4_K_M into the cache folder and reused), or a small synthetic MoE. Each
stage's seconds are in ``stages_s``; progress goes to stderr as JSON lines.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from vllmchat.bench.engine.engine_bench import _grow, _reload_figures
from vllmchat.bench.placement.moe_gpu import Stages, gpu_figures, log
from vllmchat.bench.synthetic.synth_moe import MOE_SHAPES, write_moe_gguf
from vllmchat.core.app.engines import open_local
from vllmchat.core.app.placement.tuning import describe_file
from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.models.advisor import max_gpu_expert_layers
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.models.overhead import learned_overhead
from vllmchat.core.paths import cache_dir
from vllmchat.core.placement import all_layers
from vllmchat.core.settings import LoadSettings
from vllmchat.core.tuning.tuner import available, with_free_vram


def fit_args_placement(text: str) -> tuple[int, str]:
    """(n_gpu_layers, its ``-ot`` rules) from what ``llama-fit-params`` printed (-1: all
    layers, where it printed no ``-ngl``)."""
    ngl = re.search(r"-ngl\s+(\d+)", text)
    rules = re.search(r"-ot\s+(\"[^\"]*\"|\S+)", text)
    return (int(ngl.group(1)) if ngl else -1), (rules.group(1).strip('"') if rules else "")


def _estimate_rows(
    engine: EngineClient, base: LoadSettings, desc: ModelDescription, gpu: bool
) -> list[dict[str, Any]]:
    """Load at several placements; compare the estimate with llama.cpp's buffers (and,
    on a GPU, the process's VRAM) and count the expert tensors the loader moved."""
    n = desc.n_layer
    rows: list[dict[str, Any]] = []
    placements = {0, 1, n // 2, n}
    if gpu:  # those the card holds: from all experts in RAM to the estimate's bound
        hw = engine.probe()
        fit = FitSettings.of(base, overhead=learned_overhead(hw))
        g = max_gpu_expert_layers(desc, with_free_vram(hw, available(engine, hw)[0]), fit) or 0
        placements = {n, n - g // 3, n - (2 * g) // 3, n - g}
    for n_cpu_moe in sorted(placements):
        s = base.with_changes(n_gpu_layers=all_layers(n), n_cpu_moe=n_cpu_moe)
        try:
            info = engine.load(s)
        except EngineError as exc:
            rows.append({"n_cpu_moe": n_cpu_moe, "fits": False, "note": exc.message})
            engine.close()
            engine.start()
            continue
        mem = engine.memory()
        overhead = learned_overhead(engine.probe()) if gpu else 0
        e = estimate(desc, FitSettings.of(s, gpu=gpu, overhead=overhead))
        buffers = info.buffers_mib
        if gpu:
            measured = sum(v for k, v in buffers.items() if "CPU" not in k.split(":")[1])
            predicted = (e.weights_gpu + e.kv_gpu + e.compute_gpu) / MIB
        else:
            measured = sum(buffers.values())
            predicted = e.ram / MIB
        row = {
            "n_cpu_moe": n_cpu_moe,
            "buffers_mib": round(measured, 1),
            "estimate_mib": round(predicted, 1),
            "error_pct": round((predicted - measured) / measured * 100, 2),
            "experts_overridden": sum(1 for k in info.overridden if "_exps" in k),
            "buffers": {k: round(v, 1) for k, v in buffers.items()},
        }
        if gpu and mem.vram is not None:
            row.update(vram_mib=round(mem.vram / MIB), vram_estimate_mib=round(e.vram / MIB))
            row["vram_error_pct"] = round((e.vram - mem.vram) / mem.vram * 100, 2)
        rows.append(row)
    return rows


def shape_model(shape: str, folder: Path | None = None) -> Path:
    """A Q4_K_M GGUF of ``shape``, written once into the cache folder and reused."""
    if shape not in MOE_SHAPES:
        raise ValueError(f"unknown shape {shape!r}; one of {', '.join(MOE_SHAPES)}")
    folder = folder or cache_dir() / "bench"
    path = folder / f"synthetic-{shape}-Q4_K_M.gguf"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_moe_gguf(
            tmp, shape, quant="Q4_K_M" if shape not in ("tiny-moe", "small-moe") else "F32"
        )
        os.replace(tmp, path)
    return path


def run(
    *,
    model: str | None = None,
    n_ctx: int | None = None,
    budget_s: float = 60.0,
    flash_attn: bool = False,
    quick: bool = False,
    fit_args: str | None = None,
    free_gib: float | None = None,
    shape: str | None = None,
    full: bool = False,
) -> dict[str, Any]:
    stages = Stages()
    with tempfile.TemporaryDirectory() as tmp:
        with stages.stage("model"):
            if model:
                path = model
            elif shape:
                path = str(shape_model(shape))
            else:
                path = str(write_moe_gguf(Path(tmp) / "small-moe.gguf", "small-moe"))
        desc = describe_file(path)
        if desc is None or not desc.is_moe:
            return {"model": path, "error": "not a mixture of experts llama.cpp can place"}
        held: dict[str, Any] = {}
        with contextlib.ExitStack() as stack:
            if free_gib is not None:
                from vllmchat.bench.placement.gpu_hold import hold_all_but

                with stages.stage("hold"):
                    held = stack.enter_context(hold_all_but(free_gib))
                log(held=held)
            result = _measure_all(
                path, desc, n_ctx, budget_s, flash_attn, quick, fit_args, full, stages
            )
        if held:
            result["held"] = held["devices"]
            result["free_gib"] = free_gib
    result["stages_s"] = stages.seconds
    return result


def _measure_all(
    path: str,
    desc: ModelDescription,
    n_ctx: int | None,
    budget_s: float,
    flash_attn: bool,
    quick: bool,
    fit_args: str | None,
    full: bool,
    stages: Stages,
) -> dict[str, Any]:
    engine = open_local()
    try:
        hw = engine.probe()
        gpu = hw.gpu_offload
        ctx = n_ctx or (8192 if gpu else 2048)
        base = LoadSettings(model_path=path, n_ctx=ctx, flash_attn=flash_attn)
        result: dict[str, Any] = {
            "model": Path(path).name,
            "n_layer": desc.n_layer,
            "n_expert": desc.n_expert,
            "n_expert_used": desc.n_expert_used,
            "experts_mib": round(sum(desc.expert_bytes) / MIB, 1),
            "weights_mib": round(desc.weights_bytes / MIB, 1),
            "n_ctx": ctx,
            "flash_attn": flash_attn,
            "cores": os.cpu_count(),
        }
        if gpu:
            result.update(
                gpu_figures(
                    engine, base, desc, budget_s, fit_args, quick=quick, full=full, stages=stages
                )
            )
        if gpu and not full:
            return result
        with stages.stage("placements"):
            rows = _estimate_rows(engine, base, desc, gpu)
        errors = [abs(r["error_pct"]) for r in rows if "error_pct" in r]
        result.update(
            estimate_error_max_pct=round(max(errors), 2) if errors else None, placements=rows
        )
        with stages.stage("reload"):
            # A live reload from all experts in RAM to two layers' experts on the GPU.
            s = base.with_changes(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=desc.n_layer)
            engine.load(s)
            messages: list[dict[str, str]] = [{"role": "system", "content": "Tell stories."}]
            _grow(engine, messages, 200 if quick else 600)
            result.update(_reload_figures(engine, s, messages, n_cpu_moe=desc.n_layer - 2))
    finally:
        engine.close()
    return result
