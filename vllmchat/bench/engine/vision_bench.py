"""Images kept in the KV cache: how many images a follow-up encodes, in the same engine
and after a restart through the saved KV state, and what the first encode cost.

The model is the demo model with the synthetic Gemma 3-shaped projector made for its
width (``synth_mmproj.py``), or a real model and its projector when given.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event, StatsEvent, TurnStats
from vllmchat.core.engine.images import MEDIA_MARKER
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.placement import Placement, all_layers
from vllmchat.core.settings import LoadSettings, SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, max_tokens=16, speculation="off")


def _turn(
    client: EngineClient, messages: list[dict[str, str]], images: list[bytes]
) -> tuple[DoneEvent, TurnStats]:
    events: list[Event] = list(client.chat(messages, GREEDY, ChatOptions(images=images)))
    last = events[-1]
    if isinstance(last, ErrorEvent):
        raise RuntimeError(last.message)
    assert isinstance(last, DoneEvent)
    stats = next(e.stats for e in events if isinstance(e, StatsEvent))
    return last, stats


def _learn_text_only(client: EngineClient, settings: LoadSettings) -> None:
    """Load the model alone, as a user's first load does, so that the device's runtime
    overhead is learned from it (not from the projector the figure checks)."""
    from vllmchat.core.app.placement.tuning import describe_file
    from vllmchat.core.models.memory import FitSettings, estimate
    from vllmchat.core.models.overhead import learn_overhead, learned_overhead

    desc = describe_file(settings.model_path)
    client.load(settings.with_changes(mmproj_path=""))
    hw, mem = client.probe(), client.memory()
    if desc is not None and mem.vram is not None:
        overhead = learned_overhead(hw)
        fit = FitSettings.of(settings.with_changes(mmproj_path=""), overhead=overhead)
        learn_overhead(hw, mem.vram, estimate(desc, fit).vram, overhead)


def _vram_figures(client: EngineClient, settings: LoadSettings) -> dict[str, Any]:
    """On a GPU: the estimate with the projector against the process's real VRAM."""
    from vllmchat.core.app.placement.tuning import describe_file
    from vllmchat.core.models.memory import MIB, FitSettings, estimate
    from vllmchat.core.models.overhead import learned_overhead

    desc = describe_file(settings.model_path)
    mem = client.memory()
    if desc is None or mem.vram is None:
        return {}
    overhead = learned_overhead(client.probe())
    e = estimate(desc, FitSettings.of(settings, overhead=overhead))
    return {
        "vram_mib": round(mem.vram / MIB),
        "vram_estimate_mib": round(e.vram / MIB),
        "vram_error_pct": round((e.vram - mem.vram) / mem.vram * 100, 2),
        "projector_gpu_mib": round(e.projector_gpu / MIB),
        "gpu_overhead_mib": round(overhead / MIB),
    }


def _model_and_projector(
    tmp: str, model_path: str | None, mmproj_path: str | None, real_shape: bool
) -> tuple[str, int, str]:
    """The model (default: the demo), its width, and the projector: the given one, or
    a synthetic Gemma 3 one for that width (``real_shape``: SigLIP's real size)."""
    from vllmchat.bench.synthetic.synth_mmproj import SIGLIP_SHAPE, write_gemma3_mmproj
    from vllmchat.core.app.placement.tuning import describe_file
    from vllmchat.core.demo_model import demo_model_path

    model = model_path or str(demo_model_path())
    desc = describe_file(model)
    width = desc.n_embd if desc else 576
    shape = SIGLIP_SHAPE if real_shape else None
    projector = mmproj_path or str(write_gemma3_mmproj(Path(tmp) / "mmproj.gguf", width, shape))
    return model, width, projector


def run_vision_bench(
    model_path: str | None = None,
    mmproj_path: str | None = None,
    *,
    n_threads: int = 2,
    real_shape: bool = False,
) -> dict[str, Any]:
    """One image, a follow-up, then a restart and another follow-up; returns the figures.
    ``real_shape``: the synthetic projector has Gemma 3's real vision tower (SigLIP, 256
    image tokens) instead of a tiny one. On a GPU every layer and the projector go there,
    and the estimate is compared with the real VRAM after the first image."""
    from vllmchat.bench.synthetic.synth_mmproj import png_bytes
    from vllmchat.core.app.placement.tuning import describe_file

    with tempfile.TemporaryDirectory(prefix="vllmchat-vision-") as tmp:
        model, width, projector = _model_and_projector(tmp, model_path, mmproj_path, real_shape)
        desc = describe_file(model)
        settings = LoadSettings(
            model_path=model, mmproj_path=projector, n_ctx=4096, n_threads=n_threads
        )
        picture = png_bytes(640, 480, seed=7)
        messages = [{"role": "user", "content": f"{MEDIA_MARKER}\nWhat is in this picture?"}]
        client = EngineClient()
        vram: dict[str, Any] = {}
        try:
            if client.probe().gpu_offload:
                settings = settings.with_changes(
                    n_gpu_layers=all_layers(desc.n_layer) if desc else -1
                )
                _learn_text_only(client, settings)
            client.load(settings)
            t0 = time.perf_counter()
            first, first_stats = _turn(client, messages, [picture])
            first_s = time.perf_counter() - t0
            if settings.placement.uses_gpu:
                vram = _vram_figures(client, settings)
            messages += [
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": "What colours does it have?"},
            ]
            follow, follow_stats = _turn(client, messages, [picture])
            state = str(Path(tmp) / "conversation.kv")
            client.export_state(state)
            client.close()
            client = EngineClient()
            client.load(settings)
            client.import_state(state)
            client.remember_replies(
                [(first.text, first.token_ids), (follow.text, follow.token_ids)]
            )
            messages += [
                {"role": "assistant", "content": follow.text},
                {"role": "user", "content": "Anything else?"},
            ]
            _, restart_stats = _turn(client, messages, [picture])
        finally:
            client.close()
    return {
        "image_tokens": first_stats.image_tokens,
        "image_first_encodes": first_stats.images_encoded,
        "image_followup_encodes": follow_stats.images_encoded,
        "image_restart_encodes": restart_stats.images_encoded,
        "image_first_ttft_s": round(first_stats.ttft_s, 4),
        "image_followup_ttft_s": round(follow_stats.ttft_s, 4),
        "image_restart_ttft_s": round(restart_stats.ttft_s, 4),
        "image_first_turn_s": round(first_s, 3),
        "projector": Path(projector).name
        if mmproj_path
        else f"synthetic gemma3 ({'SigLIP shape, ' if real_shape else ''}{width})",
        **vram,
    }


def run_projector_buffers(
    model_path: str | None = None,
    mmproj_path: str | None = None,
    *,
    n_threads: int = 2,
    real_shape: bool = False,
) -> dict[str, Any]:
    """The projector's weights and its encoder's compute buffer as llama.cpp reserves
    them at load, against the estimate (no image is encoded, so the real SigLIP shape
    takes seconds on a CPU). On a GPU every layer and the projector go there."""
    from vllmchat.core.models.memory import MIB
    from vllmchat.core.models.projector import read_projector

    with tempfile.TemporaryDirectory(prefix="vllmchat-projector-") as tmp:
        model, _, projector = _model_and_projector(tmp, model_path, mmproj_path, real_shape)
        info = read_projector(projector)
        client = EngineClient()
        try:
            gpu = client.probe().gpu_offload
            settings = LoadSettings(
                model_path=model,
                mmproj_path=projector,
                n_ctx=1024,
                n_threads=n_threads,
                placement=Placement(n_gpu_layers=-1 if gpu else 0),
            )
            reported = client.load(settings).buffers_mib
        finally:
            client.close()
    compute = sum(v for k, v in reported.items() if k.startswith("projector compute"))
    weights = sum(v for k, v in reported.items() if k.startswith("projector model"))
    return {
        "n_patches": info.n_patches,
        "devices": sorted({k.split(":")[1] for k in reported if k.startswith("projector")}),
        "weights_mib": round(weights, 2),
        "weights_estimate_mib": round(info.weights_bytes / MIB, 2),
        "compute_mib": round(compute, 2),
        "compute_estimate_mib": round(info.encode_bytes / MIB, 2),
        "compute_error_pct": round((info.encode_bytes / MIB - compute) / compute * 100, 2),
    }
