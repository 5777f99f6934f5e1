"""Projectors on the models side: the hub listing and download (real huggingface_hub on
the loopback mirror), the memory estimate, and ``vllmchat doctor``'s images check."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmchat.bench.synthetic.synth import write_llama_gguf
from vllmchat.bench.synthetic.synth_mmproj import VisionShape, write_gemma3_mmproj
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.catalog import list_quants
from vllmchat.core.models.description import describe
from vllmchat.core.models.download import Downloader, projector_path
from vllmchat.core.models.memory import PROJECTOR_GPU_RUNTIME, FitSettings, estimate
from vllmchat.core.models.projector import (
    looks_like_projector,
    matching_projector,
    projector_beside,
    read_projector,
)
from vllmchat.core.settings import LoadSettings

REPO = "test-org/Tiny-Vision-GGUF"


@pytest.fixture(scope="module")
def tiny_vision(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny llama (n_embd 64), two precisions of its projector, and one for another width."""
    folder = tmp_path_factory.mktemp("tiny-vision")
    return {
        "model": write_llama_gguf(folder / "Tiny-Q8_0.gguf"),
        "f16": write_gemma3_mmproj(folder / "mmproj-Tiny-f16.gguf", 64, seed=1),
        "f32": write_gemma3_mmproj(folder / "mmproj-Tiny-f32.gguf", 64, seed=2),
        "other": write_gemma3_mmproj(folder / "mmproj-Other-f16.gguf", 576, seed=3),
    }


def test_the_picker_lists_projectors_and_downloads_the_matching_one(hub, tiny_vision, tmp_path):
    hub.add(
        REPO,
        {
            "Tiny-Q8_0.gguf": tiny_vision["model"],
            "mmproj-Tiny-f32.gguf": tiny_vision["f32"],
            "mmproj-Tiny-f16.gguf": tiny_vision["f16"],
        },
    )
    (quant,) = list_quants(REPO)  # the projectors are not quants of the model
    assert quant.projector is not None and quant.projector.filename == "mmproj-Tiny-f16.gguf"
    assert quant.download_size == quant.size + tiny_vision["f16"].stat().st_size
    seen = []
    path = Downloader(tmp_path).download(quant, on_progress=seen.append)
    beside = projector_path(tmp_path, quant)
    assert beside is not None and beside.read_bytes() == tiny_vision["f16"].read_bytes()
    assert seen[-1].done == seen[-1].total == quant.download_size
    assert projector_beside(path) == str(beside)
    # Its fit counts the projector it comes with (read from the hub), not the loaded one's.
    from vllmchat.core.models.hardware import HardwareInfo
    from vllmchat.core.models.repo_advice import repo_quant_advice

    hw = HardwareInfo(8 << 30, 8 << 30, [], False)
    loaded = FitSettings(projector_bytes=512 << 20, image_tokens=99)
    ((_, advice),) = repo_quant_advice(REPO, loaded, hw)
    info = read_projector(tiny_vision["f16"])
    assert advice.fit.estimate.image_tokens == info.image_tokens
    assert advice.fit.estimate.projector_cpu == info.weights_bytes + info.encode_bytes
    from vllmchat.core.models.advisor import advise

    desc = describe(read_header(tiny_vision["model"]))
    (without,) = advise([("Tiny-Q8_0.gguf", 1, desc)], hw, loaded)  # a quant with none
    assert without.fit.estimate.image_tokens == 0 == without.fit.estimate.projector_cpu


def test_projector_names_and_the_matching_rule():
    files = [
        "a/Model-Q4_K_M.gguf",
        "a/mmproj-Model-f32.gguf",
        "a/mmproj-Model-F16.gguf",
        "b/mmproj-Model-bf16.gguf",
        "README.md",
    ]
    assert [f for f in files if looks_like_projector(f)] == files[1:4]
    assert matching_projector("a/Model-Q4_K_M.gguf", files) == "a/mmproj-Model-F16.gguf"
    assert matching_projector("Model.gguf", ["Model.gguf"]) is None


def test_a_projector_beside_a_model_of_another_width_is_not_taken(tiny_vision, tmp_path):
    model = tmp_path / "Tiny.gguf"
    model.write_bytes(tiny_vision["model"].read_bytes())
    (tmp_path / "mmproj-Other.gguf").write_bytes(tiny_vision["other"].read_bytes())
    assert projector_beside(model) is None
    info = read_projector(tiny_vision["other"])
    assert "n_embd 576" in info.fits(64) and "n_embd 64" in info.fits(64)


def test_the_estimate_adds_the_projector_and_says_the_image_tokens(tiny_vision):
    desc = describe(read_header(tiny_vision["model"]))
    load = LoadSettings(model_path=str(tiny_vision["model"]))
    plain = estimate(desc, FitSettings.of(load, gpu=False))
    seeing = estimate(
        desc, FitSettings.of(load.with_changes(mmproj_path=str(tiny_vision["f16"])), gpu=False)
    )
    info = read_projector(tiny_vision["f16"])
    assert seeing.ram - plain.ram == info.weights_bytes + info.encode_bytes
    assert seeing.projector_cpu > info.weights_bytes > 0 and seeing.projector_gpu == 0
    assert seeing.image_tokens == VisionShape().image_tokens and plain.image_tokens == 0
    on_gpu = estimate(
        desc,
        FitSettings.of(
            load.with_changes(mmproj_path=str(tiny_vision["f16"]), n_gpu_layers=99), gpu=True
        ),
    )
    # on the GPU its encoder also opens its own backend (measured on an H200)
    assert on_gpu.projector_gpu == seeing.projector_cpu + PROJECTOR_GPU_RUNTIME
    assert on_gpu.projector_cpu == info.input_bytes  # the image's pixels, on the host


def test_doctor_reports_vision(tiny_vision, tmp_path):
    from vllmchat.core.doctor.findings import Status
    from vllmchat.core.doctor.vision_check import vision

    found = vision(str(tiny_vision["model"]))
    assert found.status is Status.OK and found.data["mtmd"]
    assert "mmproj-Tiny-f16.gguf" in found.detail and "16 tokens" in found.detail
    lone = tmp_path / "Lone.gguf"
    lone.write_bytes(tiny_vision["model"].read_bytes())
    assert "text only" in vision(str(lone)).detail


def test_opening_a_model_takes_the_projector_beside_it(tiny_vision, tmp_path):
    from vllmchat.core.app_settings import AppSettings

    settings = AppSettings.of(model_path=str(tmp_path / "first.gguf"))
    opened = settings.for_model(str(tiny_vision["model"]))
    assert opened.load.mmproj_path == str(tiny_vision["f16"])
    lone = tmp_path / "Lone.gguf"
    lone.write_bytes(tiny_vision["model"].read_bytes())
    assert opened.for_model(str(lone)).load.mmproj_path == ""  # not the last model's


def test_the_picker_marks_and_filters_models_with_vision(qtbot, hub, tiny_vision, tmp_path):
    """The real picker dialog, offscreen: installed models and the hub's quants."""
    from vllmchat.core.models.hardware import HardwareInfo
    from vllmchat.ui.models.model_picker import ModelPicker

    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir(), other.mkdir()
    for key in ("model", "f16"):
        (mine / tiny_vision[key].name).write_bytes(tiny_vision[key].read_bytes())
    (other / "Lone.gguf").write_bytes(tiny_vision["model"].read_bytes())
    hub.add(
        REPO, {"Tiny-Q8_0.gguf": tiny_vision["model"], "mmproj-Tiny-f16.gguf": tiny_vision["f16"]}
    )
    hw = HardwareInfo(16 << 30, 16 << 30, [], False, "CPU-only build")
    picker = ModelPicker(hw, FitSettings(n_ctx=512), folders=[str(mine), str(other)])
    qtbot.addWidget(picker)
    qtbot.waitUntil(lambda: picker.installed.rowCount() >= 2, timeout=20_000)
    rows = {picker.installed.item(r, 0).text(): r for r in range(picker.installed.rowCount())}
    assert picker.installed.item(rows["Tiny-Q8_0.gguf"], 1).text().endswith("· vision")
    picker.show_vision_only()
    assert picker.installed.isRowHidden(rows["Lone.gguf"])
    assert not picker.installed.isRowHidden(rows["Tiny-Q8_0.gguf"])

    picker.tabs.setCurrentIndex(1)
    picker.hub.query.setText("vision")
    picker.hub.search()
    qtbot.waitUntil(lambda: picker.hub.repos.count() == 1, timeout=20_000)
    picker.hub.repos.setCurrentRow(0)
    qtbot.waitUntil(lambda: picker.hub.quant_table.rowCount() == 1, timeout=20_000)
    assert "+ vision" in picker.hub.quant_table.item(0, 1).text()
    picker.workers.join()


def test_fit_in_the_terminal_counts_a_projector_and_refuses_one_for_another_model(tiny_vision):
    import subprocess
    import sys

    def fit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vllmchat", "fit", str(tiny_vision["model"]), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    plain, seeing = fit(), fit("--mmproj", str(tiny_vision["f16"]))
    assert plain.returncode == seeing.returncode == 0, seeing.stderr
    assert "projector" not in plain.stdout
    info = read_projector(tiny_vision["f16"])
    assert f"({info.image_tokens} context tokens an image)" in seeing.stdout
    other = fit("--mmproj", str(tiny_vision["other"]))
    assert other.returncode == 2 and "made for a model with n_embd 576" in other.stderr
    missing = fit("--mmproj", str(tiny_vision["model"]))  # a model, not a projector
    assert missing.returncode == 2 and "is not a projector" in missing.stderr


def test_each_listed_model_is_fitted_with_its_own_projector(tiny_vision, tmp_path):
    from vllmchat.core.models.advisor import best_fit
    from vllmchat.core.models.hardware import HardwareInfo
    from vllmchat.core.models.local import discover
    from vllmchat.core.models.memory import projector_need
    from vllmchat.ui.models.model_picker import _local_rows

    seeing, plain = tmp_path / "seeing", tmp_path / "plain"
    for folder in (seeing, plain):
        folder.mkdir()
        (folder / "Tiny-Q8_0.gguf").write_bytes(tiny_vision["model"].read_bytes())
    (seeing / "mmproj-Tiny-f16.gguf").write_bytes(tiny_vision["f16"].read_bytes())
    hw = HardwareInfo(1 << 30, 1 << 30, [], False)
    loaded = FitSettings(projector_bytes=512 << 20, image_tokens=16)  # the loaded model's
    models = [m for m in discover([seeing, plain]) if tmp_path in Path(m.path).parents]
    rows = {m.vision: message for m, _, _, _, message in _local_rows(models, hw, loaded)}
    assert len(models) == len(rows) == 2
    desc = describe(read_header(tiny_vision["model"]))
    own = FitSettings().with_projector(projector_need(str(seeing / "mmproj-Tiny-f16.gguf")))
    assert rows[True] == best_fit(desc, hw, own).message
    assert rows[False] == best_fit(desc, hw, FitSettings()).message != rows[True]
