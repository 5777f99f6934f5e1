"""Memory estimate against llama.cpp's own buffers, and the fit advisor's decisions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.advisor import (
    GPU_PARTIAL,
    NO_FIT,
    RAM_ONLY,
    advise,
    best_fit,
    max_context,
    max_gpu_layers,
    quant_label,
    scaled,
)
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
from vllmchat.core.models.hardware_probe import probe
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.placement import all_layers
from vllmchat.core.settings import LoadSettings

GIB = 1 << 30


def _measured(path, **settings) -> float:
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime

    rt = LlamaRuntime(LoadSettings(model_path=str(path), n_threads=2, **settings))
    try:
        return sum(rt.info.buffers_mib.values())
    finally:
        rt.close()


@pytest.mark.parametrize(
    "settings",
    [
        dict(n_ctx=2048),
        dict(n_ctx=8192, flash_attn=True),
        dict(n_ctx=4096, swa_full=True, n_ubatch=256),
    ],
)
def test_estimate_matches_llama_cpp_on_the_demo_model(gemma_model, settings):
    desc = describe(read_header(gemma_model))
    e = estimate(desc, FitSettings(gpu=False, **settings))
    real = _measured(gemma_model, **settings)
    assert abs(e.total / MIB - real) / real < 0.05


@pytest.mark.parametrize("label", ["Q8_0", "Q4_K_M", "F16"])
def test_estimate_matches_llama_cpp_on_quantized_synthetic_models(small_quants, label):
    path = small_quants[label]
    e = estimate(describe(read_header(path)), FitSettings(gpu=False, n_ctx=4096))
    real = _measured(path, n_ctx=4096)
    assert abs(e.total / MIB - real) / real < 0.05


def test_gemma_sliding_window_layers_hold_only_the_window(gemma_model):
    desc = describe(read_header(gemma_model))
    windowed = estimate(desc, FitSettings(n_ctx=32768, gpu=False))
    full = estimate(desc, FitSettings(n_ctx=32768, swa_full=True, gpu=False))
    assert full.kv > 4 * windowed.kv


def _gpu(free_gib: float, ram_gib: float = 32) -> HardwareInfo:
    """A machine description with a GPU (plain data: no GPU here to probe)."""
    gpu = GpuInfo("Test GPU", int(free_gib * GIB), int(free_gib * GIB), "test")
    return HardwareInfo(int(ram_gib * GIB), int(ram_gib * GIB), [gpu], True)


def _eight_b(small_quants):
    """The small model's description with 8B-like sizes (scaled weights)."""
    desc = describe(read_header(small_quants["Q8_0"]))
    return lambda size: scaled(desc, size)


def test_gpu_layers_grow_with_free_vram_and_offload_the_last_layers(small_quants):
    desc = describe(read_header(small_quants["F16"]))
    s = FitSettings(n_ctx=2048)
    counts = [max_gpu_layers(desc, _gpu(g / 10), s) for g in (3, 4, 5, 8, 40)]
    assert counts == sorted(counts) and counts[0] < counts[-1] == all_layers(desc.n_layer)
    # llama.cpp counts the output head as the last layer and offloads it first.
    part = estimate(desc, s.placed(n_gpu_layers=3))
    assert part.weights_gpu == sum(desc.layer_bytes[-2:]) + desc.output_bytes
    assert part.kv_gpu * 2 == part.kv
    assert estimate(desc, s.placed(n_gpu_layers=1)).weights_gpu == desc.output_bytes
    cpu_only = HardwareInfo(32 * GIB, 32 * GIB, [], False, "CPU-only build")
    assert max_gpu_layers(desc, cpu_only, s) == 0
    assert best_fit(desc, cpu_only, s).kind == RAM_ONLY


def test_largest_context_fits_and_one_more_step_does_not(small_quants):
    from vllmchat.core.models.advisor import RAM_MARGIN, RAM_RESERVE

    desc = describe(read_header(small_quants["Q8_0"]))
    s = FitSettings()
    need_2k = estimate(desc, replace(s, n_ctx=2048, gpu=False)).ram
    hw = HardwareInfo(2 * GIB, int((need_2k + MIB + RAM_RESERVE) / RAM_MARGIN), [], False)
    n = max_context(desc, hw, s)
    assert 2048 <= n < desc.n_ctx_train
    assert best_fit(desc, hw, replace(s, n_ctx=n)).fits
    assert not best_fit(desc, hw, replace(s, n_ctx=n + 256)).fits


def test_advice_takes_8bit_when_it_fits_else_4bit(small_quants):
    sized = _eight_b(small_quants)
    quants = [
        (f"m-{q}.gguf", int(size * GIB), sized(int(size * GIB)))
        for q, size in (("Q4_K_M", 4.6), ("Q5_K_M", 5.3), ("Q8_0", 8.0), ("F16", 15))
    ]

    def pick(hw):
        rows = advise(quants, hw, FitSettings(n_ctx=4096))
        return [r.label for r in rows if r.recommended], {r.label: r.fit.kind for r in rows}

    assert pick(_gpu(24))[0] == ["Q8_0"]
    chosen, kinds = pick(_gpu(7))
    assert chosen == ["Q5_K_M"] and kinds["Q8_0"] == GPU_PARTIAL
    chosen, kinds = pick(_gpu(3))
    assert chosen == ["Q4_K_M"] and kinds["Q4_K_M"] == GPU_PARTIAL
    chosen, kinds = pick(HardwareInfo(6 * GIB, 6 * GIB, [], False))
    assert chosen == ["Q4_K_M"] and kinds["Q4_K_M"] == RAM_ONLY and kinds["F16"] == NO_FIT
    chosen, _ = pick(HardwareInfo(2 * GIB, 2 * GIB, [], False))
    assert chosen == []


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("model.Q8_0.gguf", "Q8_0"),
        ("Meta-Llama-3.1-8B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("x-bf16.gguf", "BF16"),
        ("big-Q5_K_S-00001-of-00003.gguf", "Q5_K_S"),
        ("readme.gguf", ""),
    ],
)
def test_quant_labels(name, label):
    assert quant_label(name) == label


def test_probe_reports_ram_and_a_cpu_only_build():
    hw = probe()
    assert hw.ram_total > hw.ram_available > 0
    assert not hw.gpu_offload and hw.offload_reason
