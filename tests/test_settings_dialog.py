"""The settings dialog: an editor per settings field, and combinations that do not
hold shown inline with OK disabled (a Qt slot never raises)."""

from __future__ import annotations

from dataclasses import fields

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.policy import ContextPolicy
from vllmchat.core.settings import SamplingSettings


def test_every_field_has_an_editor_and_a_bad_combination_disables_ok(qtbot):
    from vllmchat.ui.settings_dialog import NOT_SHOWN, PLACED_ELSEWHERE, SettingsDialog

    dialog = SettingsDialog(AppSettings.of(model_path="m.gguf"))
    qtbot.addWidget(dialog)
    names = {f.name for cls in (SamplingSettings, ContextPolicy) for f in fields(cls)}
    assert names - set(NOT_SHOWN) <= set(dialog.editors)
    assert {"n_ctx", "type_k", "type_v", "flash_attn", "n_threads_batch"} <= set(dialog.editors)
    assert not set(PLACED_ELSEWHERE) & set(dialog.editors)
    assert dialog.editors["type_v"].count() == 3  # from the field's Literal
    assert dialog.ok.isEnabled()
    dialog.editors["flash_attn"].setChecked(False)
    dialog.editors["type_v"].setCurrentText("q8_0")  # needs flash attention
    assert not dialog.ok.isEnabled()
    assert "flash attention" in dialog.note.text() and "flash attention" in dialog.ok.toolTip()
    assert dialog.result_settings() is None
    dialog.editors["flash_attn"].setChecked(True)
    assert dialog.ok.isEnabled() and "reload" in dialog.note.text()
    new = dialog.result_settings()
    assert new is not None and (new.type_v, new.flash_attn) == ("q8_0", True)
    dialog.editors["temperature"].setValue(0.3)
    dialog.editors["mode"].setCurrentText("keep_last")
    new = dialog.result_settings()
    assert new is not None and new.temperature == 0.3 and new.history.mode == "keep_last"
