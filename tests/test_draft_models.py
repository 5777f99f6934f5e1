"""Draft models: which ones match (installed, in the catalog and on the loopback hub)
and why the others do not, what they add to the memory estimate (as llama.cpp
allocates it) and the tuner's bound, and a reply that goes on when the draft
model's state breaks."""

from __future__ import annotations

import os
import shutil

import pytest

from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.models.drafts import (
    file_fingerprint,
    file_refusal,
    hub_drafts,
    installed_draft_options,
    installed_drafts,
)
from vllmchat.core.models.local import discover
from vllmchat.core.models.memory import MIB, FitSettings, draft_need, estimate
from vllmchat.core.settings import LoadSettings, SamplingSettings


def test_the_token_list_fingerprint_tells_families_apart(demo_model, gemma_model, tmp_path):
    copy = tmp_path / "copy.gguf"
    shutil.copy(demo_model, copy)
    assert file_fingerprint(copy) == file_fingerprint(demo_model) != ""
    assert file_fingerprint(gemma_model) not in ("", file_fingerprint(demo_model))


def test_installed_drafts_are_the_same_vocabulary_only(demo_model, gemma_model, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    os.link(demo_model, folder / "smol-twin.gguf")
    shutil.copy(gemma_model, folder / "gemma.gguf")
    os.symlink(demo_model, folder / "same-file.gguf")  # the model itself: not its own draft
    found = installed_drafts(demo_model, discover([folder], include_demo=False))
    assert [c.name for c in found] == ["smol-twin.gguf"]
    assert found[0].source == "installed" and found[0].path.endswith("smol-twin.gguf")
    for_gemma = installed_drafts(gemma_model, discover([folder], include_demo=False))
    assert [c.name for c in for_gemma] == ["gemma.gguf"], "smaller, but another vocabulary"


def test_the_others_are_listed_with_why_they_cannot_draft(demo_model, gemma_model, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    os.link(demo_model, folder / "smol-twin.gguf")
    shutil.copy(gemma_model, folder / "gemma.gguf")
    (folder / "broken.gguf").write_bytes(b"not a model")
    models = discover([folder], include_demo=False)
    for_demo = installed_draft_options(demo_model, models)
    assert [(c.name, c.usable) for c in for_demo] == [
        ("smol-twin.gguf", True),
        ("broken.gguf", False),
        ("gemma.gguf", False),
    ]
    assert for_demo[1].reason.startswith("unreadable (")
    assert (
        for_demo[2].reason
        == f"larger than the model ({os.path.getsize(demo_model) / MIB:,.0f} MiB)"
    )
    for_gemma = {c.name: c.reason for c in installed_draft_options(gemma_model, models)}
    counts = "49,152 tokens against the model's 262,144; tokenizer gpt2 against llama"
    other = f"another vocabulary ({counts})"
    assert for_gemma["smol-twin.gguf"] == other
    assert file_refusal(demo_model, gemma_model) == other
    assert file_refusal(folder / "smol-twin.gguf", demo_model) == ""
    assert file_refusal(folder / "gone.gguf", demo_model).startswith("unreadable (")


def test_each_refusal_says_what_differs():
    from vllmchat.core.models.drafts import Vocabulary, draft_refusal

    model = Vocabulary(32000, "llama", "a")
    assert draft_refusal(Vocabulary(32000, "llama", "a"), model) == ""
    assert draft_refusal(Vocabulary(32000, "llama", "b"), model) == (
        "other tokens in a vocabulary of the same size (32,000)"
    )
    assert draft_refusal(Vocabulary(32016, "llama", "c"), model) == (
        "another vocabulary (32,016 tokens against the model's 32,000)"
    )
    assert draft_refusal(Vocabulary(0, "?", ""), model) == "its header has no token list"
    assert draft_refusal(model, Vocabulary(0, "?", "")) == "the model's header has no token list"


def test_the_catalogs_models_are_checked_before_the_hubs(hub, demo_model):
    hub.add("catalog/SmolLM2-Draft-GGUF", {"draft-Q4_1.gguf": demo_model})
    hub.add("someone/SmolLM2-135M-Instruct-GGUF", {"smol-Q4_1.gguf": demo_model})
    found = hub_drafts(demo_model, catalog=["catalog/SmolLM2-Draft-GGUF", "gone/Missing-GGUF"])
    assert [(c.source, c.repo) for c in found] == [
        ("catalog", "catalog/SmolLM2-Draft-GGUF"),
        ("hub", "someone/SmolLM2-135M-Instruct-GGUF"),
    ]


def test_hub_drafts_are_checked_by_their_header_alone(hub, demo_model, gemma_model, tiny_models):
    hub.add("someone/SmolLM2-135M-Instruct-GGUF", {"smol-Q4_1.gguf": demo_model}, downloads=9)
    hub.add("other/SmolLM2-tiny-GGUF", {"tiny-Q8_0.gguf": tiny_models["chatml"]}, downloads=7)
    hub.add("big/SmolLM2-gemma-GGUF", {"big-Q4_K_M.gguf": gemma_model}, downloads=5)
    found = hub_drafts(demo_model)
    assert [(c.repo, c.filename) for c in found] == [
        ("someone/SmolLM2-135M-Instruct-GGUF", "smol-Q4_1.gguf")
    ]
    ranges = hub.range_requests("smol-Q4_1.gguf") + hub.range_requests("tiny-Q8_0.gguf")
    assert ranges and all(r is not None for r in ranges), "only headers were fetched"
    assert hub.range_requests("big-Q4_K_M.gguf") == [], "larger than the model: not read"


def test_a_draft_model_counts_in_the_estimate_and_the_tuners_bound(demo_model, gemma_model):
    from vllmchat.core.gguf_header import read_header
    from vllmchat.core.models.advisor import best_fit, max_gpu_layers
    from vllmchat.core.models.description import describe
    from vllmchat.core.models.hardware import GpuInfo, HardwareInfo

    desc = describe(read_header(gemma_model))
    alone = LoadSettings(model_path=str(gemma_model), n_ctx=2048)
    paired = LoadSettings(
        model_path=str(gemma_model), n_ctx=2048, draft_model=str(demo_model), draft_n_gpu_layers=99
    )
    on_cpu = estimate(desc, FitSettings.of(paired, gpu=False))
    assert on_cpu.draft_cpu > os.path.getsize(demo_model) * 0.9
    assert on_cpu.ram == estimate(desc, FitSettings.of(alone, gpu=False)).ram + on_cpu.draft_cpu
    on_gpu = estimate(desc, FitSettings.of(paired))
    assert on_gpu.draft_gpu > os.path.getsize(demo_model) * 0.9 and on_gpu.draft_cpu < 2**26
    card = GpuInfo("card", 1200 * 2**20, 1200 * 2**20)  # all of the model, not with the draft
    small_card = HardwareInfo(2**34, 2**34, [card], gpu_offload=True)
    fewer = max_gpu_layers(desc, small_card, FitSettings.of(paired))
    assert 0 <= fewer < max_gpu_layers(desc, small_card, FitSettings.of(alone))
    said = best_fit(desc, small_card, FitSettings.of(paired)).message
    assert "the draft model's" in said and "MiB included" in said, said
    assert "draft" not in best_fit(desc, small_card, FitSettings.of(alone)).message


@pytest.mark.parametrize("which", ["demo_model", "gemma_model"])
def test_a_draft_models_estimate_is_what_llama_cpp_allocates(which, request):
    """The model drafting for itself, loaded as the engine loads a draft: the KV cache
    and weights llama.cpp reports are the model's estimate plus the draft's (Gemma's
    draft keeps every sliding-window cell, the model only the window)."""
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.gguf_header import read_header
    from vllmchat.core.models.description import describe

    model = str(request.getfixturevalue(which))
    settings = LoadSettings(model_path=model, n_ctx=2048, n_threads=2, draft_model=model)
    rt = LlamaRuntime(settings)
    measured, gpu = rt.info.buffers_mib, rt.info.gpu_offload
    rt.close()
    alone_settings = FitSettings.of(LoadSettings(model_path=model, n_ctx=2048), gpu=gpu)
    alone = estimate(describe(read_header(model)), alone_settings)
    draft = draft_need(settings, gpu=gpu)
    assert draft is not None
    kv = sum(v for k, v in measured.items() if k.startswith("kv:"))
    assert kv == pytest.approx((alone.kv + draft.kv) / MIB, abs=0.02)
    weights = sum(v for k, v in measured.items() if k.startswith("model:"))
    both = alone.weights_cpu + alone.weights_gpu + draft.weights_cpu + draft.weights_gpu
    assert weights == pytest.approx(both / MIB, rel=0.01)
    if which == "gemma_model":
        assert draft.kv > 1.5 * alone.kv, "the draft's full cache against the model's window"


def test_a_broken_draft_model_lets_the_reply_go_on_with_a_note(demo_model):
    """The draft's decode is made to fail as llama.cpp reports it (a state that
    cannot be broken on purpose otherwise); the model itself is real."""
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
    from vllmchat.core.engine.process.inference.turn import run_turn

    rt = LlamaRuntime(
        LoadSettings(
            model_path=str(demo_model), n_ctx=1024, n_threads=2, draft_model=str(demo_model)
        )
    )
    assert rt.draft is not None
    draft = rt.draft

    def broken(tokens: object) -> None:
        raise RuntimeError("llama_decode returned -3")

    draft.llm.eval = broken  # type: ignore[method-assign]
    events: list[object] = []
    sampling = SamplingSettings(temperature=0.0, max_tokens=24, speculation="always")
    ask = [{"role": "user", "content": "Count from one to ten."}]
    run_turn(rt, ask, sampling, should_stop=lambda: False, emit=events.append)
    done = next(e for e in events if isinstance(e, DoneEvent))
    assert len(done.token_ids) == 24 and rt.draft is None
    assert "draft model failed" in done.stats.note and "llama_decode returned -3" in done.stats.note
    events.clear()
    run_turn(
        rt,
        [*ask, {"role": "assistant", "content": done.text}, {"role": "user", "content": "Again."}],
        sampling,
        should_stop=lambda: False,
        emit=events.append,
    )
    assert any(isinstance(e, DoneEvent) for e in events), "later turns need no draft"
    rt.close()


def test_the_terminal_lists_matching_draft_models(demo_model, tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "m"
    folder.mkdir()
    os.link(demo_model, folder / "smol-twin.gguf")
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "drafts", str(demo_model), "--folder", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "smol-twin.gguf" in proc.stdout and "--draft-model " in proc.stdout


def test_the_settings_list_matching_drafts_and_the_hubs(qtbot, hub, demo_model, gemma_model):
    from PySide6.QtCore import Qt

    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.paths import models_dir
    from vllmchat.ui.dialogs.settings_dialog import SettingsDialog

    models_dir().mkdir(parents=True, exist_ok=True)
    twin = models_dir() / "smol-twin-for-drafts.gguf"
    if not twin.exists():
        os.link(demo_model, twin)
    shutil.copy(gemma_model, models_dir() / "gemma-not-a-draft.gguf")
    hub.add("someone/SmolLM2-135M-Instruct-GGUF", {"smol-Q4_1.gguf": demo_model})
    dialog = SettingsDialog(AppSettings.of(model_path=str(demo_model)))
    qtbot.addWidget(dialog)
    combo, rows = dialog.drafts.combo, dialog.drafts.choices
    qtbot.waitUntil(lambda: dialog.drafts.installed is not None, timeout=30000)
    items = [combo.itemText(i) for i in range(combo.count())]
    assert str(twin) in items and not any("gemma" in i for i in items)
    listed = {rows.item(i).text(): rows.item(i) for i in range(rows.count())}
    ok = next(item for text, item in listed.items() if "smol-twin-for-drafts.gguf" in text)
    greyed = next(item for text, item in listed.items() if "gemma-not-a-draft.gguf" in text)
    assert ok.text().startswith("✓") and "same vocabulary" in ok.text()
    assert greyed.text().startswith("✗") and "larger than the model" in greyed.text()
    assert not greyed.flags() & Qt.ItemFlag.ItemIsEnabled, "shown with why, not offered"
    rows.itemClicked.emit(ok)
    assert combo.currentText() == str(twin)
    new = dialog.result_settings()
    assert new is not None and new.load.draft_model == str(twin)
    dialog.drafts.hub_button.click()
    qtbot.waitUntil(lambda: bool(dialog.drafts.hub), timeout=30000)
    texts = [rows.item(i).text() for i in range(rows.count())]
    assert any(t.startswith("↓ someone/SmolLM2-135M-Instruct-GGUF · smol-Q4_1.gguf") for t in texts)
    assert "download one from Models" in dialog.drafts.found.text()
    dialog.reject()
    mismatch = SettingsDialog(
        AppSettings.of(model_path=str(demo_model), draft_model=str(gemma_model))
    )
    qtbot.addWidget(mismatch)
    qtbot.waitUntil(lambda: mismatch.drafts.installed is not None, timeout=30000)
    assert "cannot draft for this model: another vocabulary (262,144 tokens against" in (
        mismatch.drafts.found.text()
    )
    mismatch.reject()
    (models_dir() / "gemma-not-a-draft.gguf").unlink()
    twin.unlink()
