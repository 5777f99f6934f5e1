"""Mixture-of-experts placement on real llama.cpp with synthetic Qwen3-MoE GGUFs:
the override list, the estimate against llama.cpp's buffers, live reload, the
advisor, the terminal, the offload panel and the picker's badges."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import done, run_turn, stats_of, terminal_chat
from tests.test_placement import estimated
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.advisor import GPU_PARTIAL, best_fit, best_placement, check_fit
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.placement import Placement, all_layers
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.tuning import plan
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult

GIB = 1 << 30


@pytest.fixture(scope="session")
def moe_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from vllmchat.bench.synthetic.synth_moe import write_moe_gguf

    folder = tmp_path_factory.mktemp("moe")
    return {
        name: write_moe_gguf(folder / f"{name}.gguf", name) for name in ("tiny-moe", "small-moe")
    }


def _gpus(*free_mib: float) -> HardwareInfo:
    """A machine with GPUs of this much free memory (plain data: no GPU here)."""
    gpus = [GpuInfo(f"GPU{i}", int(f * MIB), int(f * MIB), "test") for i, f in enumerate(free_mib)]
    return HardwareInfo(32 * GIB, 32 * GIB, gpus, True)


def test_the_description_knows_experts_per_layer(moe_models):
    desc = describe(read_header(moe_models["small-moe"]))
    assert (desc.n_expert, desc.n_expert_used, desc.n_ff_exp) == (16, 4, 256)
    # gate, up and down of 16 experts of 256 x 512 in F32, in every layer
    assert desc.expert_bytes == [3 * 16 * 256 * 512 * 4] * desc.n_layer
    assert all(e < b for e, b in zip(desc.expert_bytes, desc.layer_bytes, strict=True))
    assert desc.is_moe and desc.moe_unplaceable_reason == ""


def _write_named(path: Path, names: list[str]) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(1)
    w.add_expert_count(4)
    w.add_expert_used_count(2)
    for name in names:
        w.add_tensor(name, np.zeros((4, 8, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_fused_experts_are_recognised_and_unknown_names_hide_the_control(tmp_path):
    fused = describe(
        read_header(
            _write_named(
                tmp_path / "f.gguf",
                [
                    "blk.0.ffn_gate_up_exps.weight",
                    "blk.0.ffn_down_exps.weight",
                    "blk.0.ffn_up_shexp.weight",
                ],
            )
        )
    )
    assert fused.is_moe and fused.expert_bytes == [2 * 4 * 8 * 32 * 4]  # the shared one stays
    odd = describe(read_header(_write_named(tmp_path / "o.gguf", ["blk.0.ffn_experts.weight"])))
    assert not odd.is_moe and "not recognise" in odd.moe_unplaceable_reason


def test_the_override_list_reaches_llama_cpp(make_client, moe_models):
    client = make_client()
    path = str(moe_models["tiny-moe"])
    info = client.load(
        LoadSettings(model_path=path, n_ctx=512, n_threads=2).with_changes(n_cpu_moe=2)
    )
    assert info.overridden == {
        f"blk.{i}.ffn_{part}_exps.weight": "CPU" for i in (0, 1) for part in ("gate", "up", "down")
    }
    info = client.load(LoadSettings(model_path=path, n_ctx=512, n_threads=2))
    assert info.overridden == {}
    rule = r"blk\.3\.ffn_down_exps=CPU"
    info = client.load(
        LoadSettings(model_path=path, n_ctx=512, n_threads=2).with_changes(override_tensors=rule)
    )
    assert info.overridden == {"blk.3.ffn_down_exps.weight": "CPU"}


def test_the_estimate_matches_llama_cpps_buffers_at_every_placement(make_client, moe_models):
    client = make_client()
    path = str(moe_models["small-moe"])
    desc = describe(read_header(path))
    for n_cpu_moe in (0, 1, 3, desc.n_layer):
        s = LoadSettings(
            model_path=path,
            n_ctx=1024,
            n_threads=2,
            placement=Placement(n_gpu_layers=99, n_cpu_moe=n_cpu_moe),
        )
        measured = sum(client.load(s).buffers_mib.values())
        predicted = estimate(desc, FitSettings.of(s, gpu=False)).ram / MIB
        assert abs(predicted - measured) <= 0.05 * measured, (n_cpu_moe, predicted, measured)


def test_a_live_reload_between_placements_keeps_the_kv_state(make_client, moe_models):
    client = make_client()
    s = LoadSettings(
        model_path=str(moe_models["tiny-moe"]),
        n_ctx=1024,
        n_threads=2,
        placement=Placement(n_gpu_layers=99, n_cpu_moe=4),
    )
    client.load(s)
    sampling = SamplingSettings(temperature=0.0, max_tokens=16, ignore_eos=True)
    messages = [{"role": "user", "content": "Tell me a story about a ship."}]
    text, _ = run_turn(client, messages, sampling)
    kept = client.kv().kv_tokens
    result = client.reload(s.with_changes(n_cpu_moe=1))
    assert result.restored and result.tokens == kept and result.reason == ""
    messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "More."}]
    _, events = run_turn(client, messages, sampling)
    stats = stats_of(events)
    assert done(events) and stats.tokens_reused >= kept - 1
    assert stats.tokens_prefilled == stats.tokens_new  # nothing of the history again


def test_experts_in_ram_on_a_dense_model_are_refused(make_client, demo_model):
    client = make_client()
    with pytest.raises(EngineError) as err:
        client.load(
            LoadSettings(model_path=str(demo_model), n_ctx=512, placement=Placement(n_cpu_moe=4))
        )
    assert err.value.kind == ErrorKind.BAD_REQUEST
    assert "not a mixture of experts" in err.value.message and "n_cpu_moe to 0" in str(err.value)
    assert client.alive  # the engine is fine; the next load works
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=512))


def test_the_advisor_puts_experts_in_ram_before_whole_layers(moe_models):
    desc = describe(read_header(moe_models["small-moe"]))
    s = FitSettings(n_ctx=2048)
    full = estimate(desc, s.placed(n_gpu_layers=all_layers(desc.n_layer)))
    # A card with room for the attention and half the experts, not for all of them.
    room = (full.vram - sum(desc.expert_bytes) // 2) / MIB / 0.92
    hw = _gpus(room)
    place = best_placement(desc, hw, s).placement
    assert place.n_gpu_layers == all_layers(desc.n_layer) and 0 < place.n_cpu_moe < desc.n_layer
    fit = best_fit(desc, hw, s)
    assert fit.kind == GPU_PARTIAL and fit.placement == place
    assert f"experts of {place.n_cpu_moe} layers on the CPU" in fit.message
    assert fit.short == f"fits: experts of {place.n_cpu_moe} layers on the CPU"
    one_more = check_fit(desc, hw, s.placed(n_gpu_layers=-1, n_cpu_moe=place.n_cpu_moe - 1))
    assert not one_more.fits  # the fewest experts in RAM that fit
    at = [s.with_placement(replace(place, n_cpu_moe=k)) for k in range(desc.n_layer + 1)]
    vram = [estimate(desc, placed).vram for placed in at]
    assert vram == sorted(vram, reverse=True)
    # Enough for everything: no expert in RAM.
    assert best_placement(desc, _gpus(full.vram / MIB / 0.9), s).placement.n_cpu_moe == 0


def test_several_gpus_one_when_it_fits_else_split_by_free_memory(moe_models):
    desc = describe(read_header(moe_models["small-moe"]))
    s = FitSettings(n_ctx=2048, gpu_overhead=16 * MIB)  # each GPU has its own runtime
    need = estimate(desc, s.placed(n_gpu_layers=all_layers(desc.n_layer))).vram / MIB / 0.9
    alone = best_placement(desc, _gpus(need, need), s)
    assert alone.placement.tensor_split == "1,0" and alone.placement.n_cpu_moe == 0
    split = best_placement(desc, _gpus(need * 0.75, need * 0.75), s)
    assert split.placement.tensor_split == "" and split.placement.n_cpu_moe == 0
    fit = check_fit(desc, _gpus(need * 0.75, need * 0.75), split)
    first, second = fit.estimate.vram_by_device
    assert fit.fits and first > 0 and second > 0 and "on the GPUs" in fit.message


def test_the_terminal_chat_takes_n_cpu_moe_and_moves_experts_live(moe_models):
    script = "Hello\n/moe 1\nAgain\n/quit\n"
    proc = terminal_chat(
        script,
        "--model",
        str(moe_models["tiny-moe"]),
        "--n-cpu-moe",
        "3",
        "--n-gpu-layers",
        "99",
        "--n-ctx",
        "512",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ai> ") == 2 and "KV cache kept" in proc.stdout
    dense = subprocess.run(
        [sys.executable, "-m", "vllmchat", "fit", str(moe_models["small-moe"]), "--n-cpu-moe", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "mixture of experts: 16 experts, 4 used per token" in dense.stdout


def test_the_tuners_expert_axis_and_pick():
    axis = plan.Axis(True, 48)
    base = TuneConfig(Placement(n_gpu_layers=0), 16, 16, 512)
    c = axis.at(base, 12)
    assert (c.placement.n_gpu_layers, c.placement.n_cpu_moe, axis.value(c), axis.top) == (
        49,
        36,
        12,
        48,
    )
    assert plan.layer_plan(12, 48, top=48) == [12, 11, 10, 9, 6, 3, 0]
    points = [
        TunePoint(axis.at(base, g), True, decode_tok_s=speed, prefill_tok_s=1000)
        for g, speed in ((12, 50.0), (10, 49.5), (6, 40.0))
    ]
    pick, why = plan.choose(points, base, plan.MemoryLimits())
    assert pick is not None and pick.placement.n_cpu_moe == 38  # within 2%: more experts in RAM
    assert "experts of 38 on the CPU" in why and "within 2%" in why
    assert TuneConfig.of(pick.apply_to(LoadSettings(model_path="m"))) == pick


def test_the_offload_panel_has_an_expert_control_for_moe_models(qtbot, moe_models):
    from vllmchat.ui.offload.offload_panel import OffloadPanel

    desc = describe(read_header(moe_models["small-moe"]))
    hw = _gpus(4096)
    panel = OffloadPanel()
    qtbot.addWidget(panel)
    panel.show()
    estimated(panel)
    placed = Placement(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=2)
    panel.set_model(desc, hw, FitSettings(n_ctx=2048, placement=placed))
    assert panel.expert_slider.isVisible() and panel.expert_slider.isEnabled()
    assert panel.expert_heading.text() == (
        f"Expert layers on the GPU: {desc.n_layer - 2} of {desc.n_layer} "
        "(experts of 2 layers on the CPU)"
    )
    before = panel.estimate.text()
    with qtbot.waitSignal(panel.placement_requested, timeout=3000) as reload:
        panel.expert_slider.setValue(desc.n_layer - 5)  # keyboard: reloads after a pause
    assert reload.args == [Placement(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=5)]
    assert panel.estimate.text() != before and "experts of 5 layers on the CPU" in before + (
        panel.estimate.text()
    )
    result = TuneResult(
        points=(
            TunePoint(
                TuneConfig(
                    Placement(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=4), 2, 2, 512
                ),
                True,
                decode_tok_s=30.0,
            ),
            TunePoint(
                TuneConfig(
                    Placement(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=1), 2, 2, 512
                ),
                True,
                decode_tok_s=40.0,
            ),
        ),
        pick=TuneConfig(Placement(n_gpu_layers=all_layers(desc.n_layer), n_cpu_moe=1), 2, 2, 512),
        reason="40 tok/s",
        seconds=1.0,
    )
    panel.show_tuning(result)
    assert panel.expert_marks.marks == {desc.n_layer - 4: 30.0, desc.n_layer - 1: 40.0}
    assert panel.expert_marks.pick == desc.n_layer - 1
    assert "<b>5: 40</b>" in panel.marks.text()
    dense = replace(desc, n_expert=0, expert_bytes=[0] * desc.n_layer)
    panel.set_model(dense, hw, FitSettings(n_ctx=2048, placement=Placement(n_gpu_layers=3)))
    assert not panel.expert_slider.isVisible() and panel.placement() == Placement(n_gpu_layers=3)
    odd = replace(desc, expert_bytes=[0] * desc.n_layer)
    panel.set_model(odd, hw, FitSettings(n_ctx=2048, placement=Placement(n_gpu_layers=3)))
    assert not panel.expert_slider.isVisible() and "not recognise" in panel.expert_note.text()


def test_the_pickers_badge_names_the_experts_in_ram(moe_models):
    from vllmchat.ui.models.fit_badge import badge

    desc = describe(read_header(moe_models["small-moe"]))
    full = estimate(desc, FitSettings(n_ctx=2048).placed(n_gpu_layers=all_layers(desc.n_layer)))
    hw = _gpus((full.vram - sum(desc.expert_bytes) // 2) / MIB / 0.92)
    fit = best_fit(desc, hw, FitSettings(n_ctx=2048))
    text, color = badge(fit)
    assert text == f"fits: experts of {fit.placement.n_cpu_moe} layers on the CPU"
    assert color == "#f9a825"


def test_one_gpu_against_a_split_is_measured_and_the_faster_taken(qtbot):
    from vllmchat.ui.offload.memory_panel import MemoryPanel

    assert plan.split_plan(2) == ["1,0", ""] and plan.split_plan(1) == []
    base = TuneConfig(Placement(n_gpu_layers=49), 16, 16, 512)
    points = [
        TunePoint(base.placed(tensor_split=s), True, decode_tok_s=v, prefill_tok_s=1.0)
        for s, v in (("1,0", 273.4), ("", 263.5))
    ]
    pick, _ = plan.choose(points, base, plan.MemoryLimits())
    assert pick is not None and pick.placement.tensor_split == "1,0"
    panel = MemoryPanel()
    qtbot.addWidget(panel)
    panel.update_usage(
        rss=1 << 30,
        buffers_mib={
            "model:CUDA0": 3000.0,
            "model:CUDA1": 2800.0,
            "kv:CUDA0": 426.0,
            "kv:CUDA1": 430.0,
            "model:CPU_Mapped": 80.0,
        },
        kv_tokens=0,
        n_ctx=8192,
        kv_bytes_per_token=0.0,
    )
    assert "(CUDA0 3,426, CUDA1 3,230)" in panel.vram.text()
    panel.update_usage(
        rss=1 << 30,
        buffers_mib={
            "model:CUDA0": 3000.0,
            "compute:CUDA0": 300.0,
            "projector model:CUDA0": 806.1,
            "projector compute:CUDA0": 121.3,
        },
        kv_tokens=0,
        n_ctx=8192,
        kv_bytes_per_token=0.0,
    )
    assert "compute 300 MiB · projector 927 MiB" in panel.split.text()
    assert "4,227 MiB llama.cpp buffers" in panel.vram.text()


def test_a_placement_past_the_card_is_out_of_memory_with_the_expert_fix():
    """llama.cpp's log of a failed CUDA allocation, as the H200 printed it (no GPU here)."""
    from vllmchat.core.engine.failures import classify_load_failure

    lines = [
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 5990.92 MiB on device 0: "
        "cudaMalloc failed: out of memory",
        "alloc_tensor_range: failed to allocate CUDA0 buffer of size 6281940992",
        "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
    ]
    s = LoadSettings(model_path="m", placement=Placement(n_gpu_layers=49, n_cpu_moe=20))
    err = classify_load_failure(lines, s, "model", moe=True)
    assert err.kind == ErrorKind.OOM_LOAD and "experts of 20 layers in RAM" in err.message
    assert err.fix.startswith("Put the experts of more layers on the CPU")
    dense = classify_load_failure(lines, s.with_changes(n_cpu_moe=0), "model", moe=False)
    assert dense.kind == ErrorKind.OOM_LOAD and "lower n_gpu_layers" in dense.fix
