"""The GPU runtime's overhead before any load: the probe's reading of the context."""

from __future__ import annotations

import dataclasses

from vllmchat.core.models.hardware import BackendInfo, GpuInfo, HardwareInfo
from vllmchat.core.models.memory import GPU_RUNTIME_OVERHEAD, MIB
from vllmchat.core.models.overhead import (
    FIRST_TURN_RUNTIME,
    learn_overhead,
    learned_overhead,
)
from vllmchat.core.models.projector import ProjectorInfo


def _card(name: str, context: int) -> HardwareInfo:
    gpu = GpuInfo(name, 141 << 30, 140 << 30)
    return HardwareInfo(
        1 << 30,
        1 << 30,
        [gpu],
        True,
        backends=(BackendInfo("CUDA", (gpu,)),),
        runtime_context=context,
    )


def test_a_first_estimate_takes_the_context_the_probe_read_plus_a_first_turn():
    hw = _card("Probed GPU", 518 * MIB)
    # measured on an H200: 600-605 MiB beyond llama.cpp's buffers after a first turn
    assert learned_overhead(hw) == 518 * MIB + FIRST_TURN_RUNTIME
    assert 598 * MIB <= learned_overhead(hw) <= 606 * MIB


def test_without_a_reading_the_default_stands_and_a_learned_figure_wins():
    unread = _card("Unread GPU", 0)
    assert learned_overhead(unread) == GPU_RUNTIME_OVERHEAD
    read = dataclasses.replace(unread, runtime_context=300 * MIB)
    learn_overhead(read, 700 * MIB, 0, 0)
    assert learned_overhead(read) == 700 * MIB, "a real load's figure replaces the first guess"


def test_the_image_enters_the_encoder_as_f32_pixels_in_a_host_buffer():
    def info(size: int) -> ProjectorInfo:
        return ProjectorInfo("m.gguf", "gemma3", 2560, size, 14, 4, 1152, 27, 16, 4304, 0)

    # llama.cpp's "projector compute:CPU" on an H200: 9.19, 2.30 and 0.57 MiB
    for size, reported in ((896, 9.19), (448, 2.30), (224, 0.57)):
        assert abs(info(size).input_bytes / MIB - reported) < 0.01


def test_a_projector_on_the_gpu_keeps_the_image_in_ram():
    from vllmchat.core.app.placement.tuning import describe_file
    from vllmchat.core.demo_model import demo_model_path
    from vllmchat.core.models.memory import FitSettings, estimate
    from vllmchat.core.placement import Placement

    desc = describe_file(str(demo_model_path()))
    assert desc is not None
    siglip = ProjectorInfo("m.gguf", "gemma3", 576, 896, 14, 4, 1152, 27, 16, 4304, 800 << 20)
    on_gpu = FitSettings(placement=Placement(n_gpu_layers=-1)).with_projector(siglip)
    on_cpu = FitSettings(placement=Placement(n_gpu_layers=0)).with_projector(siglip)
    gpu, cpu = estimate(desc, on_gpu), estimate(desc, on_cpu)
    assert gpu.projector_cpu == siglip.input_bytes, "llama.cpp's projector compute:CPU"
    assert gpu.projector_gpu >= siglip.weights_bytes + siglip.encode_bytes
    assert cpu.projector_cpu == siglip.weights_bytes + siglip.encode_bytes
