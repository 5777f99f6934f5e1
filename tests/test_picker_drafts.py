"""The model picker's Draft models tab lists what Settings → Draft model lists, for
the loaded model: the matches to pick, the others greyed with the reason (real GGUF
files, real widgets offscreen)."""

from __future__ import annotations

import os
import shutil

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from vllmchat.core.models.drafts import installed_draft_options
from vllmchat.core.models.local import discover
from vllmchat.core.models.memory import FitSettings
from vllmchat.ui.models.draft_field import row_text
from vllmchat.ui.models.model_picker import ModelPicker


def _rows(picker: ModelPicker) -> list[str]:
    rows = picker.drafts.field.choices
    return [rows.item(i).text() for i in range(rows.count())]


def test_the_picker_lists_matching_drafts_and_refusals_with_reasons(
    qtbot, demo_model, gemma_model, tmp_path
):
    folder = tmp_path / "models"
    folder.mkdir()
    os.link(demo_model, folder / "smol-twin.gguf")
    shutil.copy(gemma_model, folder / "gemma.gguf")
    (folder / "broken.gguf").write_bytes(b"not a model")
    picker = ModelPicker(None, FitSettings(), folders=[str(folder)], model_path=str(demo_model))
    qtbot.addWidget(picker)
    field = picker.drafts.field
    qtbot.waitUntil(lambda: field.installed is not None, timeout=30_000)
    expected = [row_text(c) for c in installed_draft_options(demo_model, discover([folder]))]
    assert _rows(picker) == expected, "the rows the settings' draft field shows"
    twin = next(t for t in expected if "smol-twin.gguf" in t)
    assert twin.startswith("✓") and "same vocabulary" in twin
    gemma = next(t for t in expected if "gemma.gguf" in t)
    assert gemma.startswith("✗") and "larger than the model" in gemma
    assert next(t for t in expected if "broken.gguf" in t).startswith("✗ broken.gguf")
    greyed = field.choices.item(expected.index(gemma))
    assert not greyed.flags() & Qt.ItemFlag.ItemIsEnabled, "shown with why, not offered"
    field.choices.itemClicked.emit(field.choices.item(expected.index(twin)))
    picker.drafts.use.click()
    assert picker.result() == QDialog.DialogCode.Accepted
    assert picker.chosen_draft == str(folder / "smol-twin.gguf")
    assert picker.chosen_path is None and picker.chosen_server is None


def test_without_a_loaded_model_the_tab_says_to_load_one(qtbot):
    picker = ModelPicker(None, FitSettings())
    qtbot.addWidget(picker)
    assert not picker.drafts.use.isEnabled()
    assert _rows(picker) == []
    picker.reject()
    assert picker.chosen_draft is None
