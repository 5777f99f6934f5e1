"""Memory by OS: Apple silicon's one pool (RAM and GPU memory are the same), and NVML's
library on Windows. The machine's facts are injected (no Mac or Windows machine runs
these tests); the model is a real GGUF header with its tensors scaled."""

from __future__ import annotations

import pytest

from tests.test_placement import estimated
from vllmchat.bench.placement.fake_card import scaled_moe
from vllmchat.core.machine.nvml import library_candidates
from vllmchat.core.models.advisor import best_fit, check_fit
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo, apple_silicon
from vllmchat.core.models.memory import MIB, FitSettings
from vllmchat.core.placement import Placement, all_layers

GIB = 1024 * MIB
N_LAYER = 8


@pytest.fixture(scope="module")
def desc(tmp_path_factory: pytest.TempPathFactory) -> ModelDescription:
    return scaled_moe(tmp_path_factory.mktemp("pool"), n_layer=N_LAYER, expert_mib=512)


def _mac(ram_free: int, limit: int, *, unified: bool = True) -> HardwareInfo:
    """An Apple-silicon Mac: Metal's device reports its working-set limit as free."""
    gpu = GpuInfo("Apple M3 Pro", limit, limit)
    return HardwareInfo(ram_free + 2 * GIB, ram_free, [gpu], True, unified=unified)


def _all_on_gpu(desc: ModelDescription) -> FitSettings:
    return FitSettings(n_ctx=2048, placement=Placement(n_gpu_layers=all_layers(N_LAYER)))


def test_the_gpu_part_is_taken_from_the_same_ram(desc):
    # ~4.1 GiB of weights; the GPU may take 10 GiB; 4.5 GiB of RAM is free.
    separate = check_fit(desc, _mac(int(4.5 * GIB), 10 * GIB, unified=False), _all_on_gpu(desc))
    pool = check_fit(desc, _mac(int(4.5 * GIB), 10 * GIB), _all_on_gpu(desc))
    assert separate.fits  # counted as two memories it would seem to fit
    assert not pool.fits and "one memory pool" in pool.message
    roomy = check_fit(desc, _mac(16 * GIB, 10 * GIB), _all_on_gpu(desc))
    assert roomy.fits and roomy.kind == "gpu_full"


def test_the_working_set_limit_caps_the_gpu_share(desc):
    hw = _mac(32 * GIB, 2 * GIB)  # plenty of RAM, the GPU may hold only 2 GiB of it
    assert hw.gpu_limit == 2 * GIB
    assert not check_fit(desc, hw, _all_on_gpu(desc)).fits
    fit = best_fit(desc, hw, FitSettings(n_ctx=2048))
    assert fit.fits and fit.estimate.vram <= 2 * GIB and fit.placement.n_cpu_moe > 0


def test_the_offload_panel_shows_one_pool(qtbot, desc):
    from vllmchat.ui.offload.offload_panel import OffloadPanel

    panel = OffloadPanel()
    qtbot.addWidget(panel)
    estimated(panel)  # the application layer's estimates, as the window wires them
    panel.set_model(desc, _mac(16 * GIB, 10 * GIB), _all_on_gpu(desc))
    text = panel.estimate.text()
    assert "one pool" in text and "of at most 10.0 GiB" in text and "VRAM" not in text


def test_apple_silicon_is_one_pool_and_other_machines_are_not():
    assert apple_silicon("darwin", "arm64")
    assert not apple_silicon("darwin", "x86_64") and not apple_silicon("linux", "arm64")


def test_nvml_is_found_by_each_os_name():
    assert library_candidates("linux") == ("libnvidia-ml.so.1",)
    win = library_candidates("win32", {"SystemRoot": "C:\\Windows"})
    assert win[0] == "nvml.dll" and win[1] == "C:\\Windows\\System32\\nvml.dll"
    assert win[2].endswith("NVIDIA Corporation\\NVSMI\\nvml.dll")
    assert library_candidates("darwin") == ()
