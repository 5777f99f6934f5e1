"""The settings dialog: an editor per settings field, and combinations that do not
hold shown inline with OK disabled (a Qt slot never raises)."""

from __future__ import annotations

from dataclasses import fields

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.settings import SamplingSettings


def test_every_field_has_an_editor_and_a_bad_combination_disables_ok(qtbot):
    from vllmchat.ui.dialogs.settings_dialog import NOT_SHOWN, PLACED_ELSEWHERE, SettingsDialog

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
    assert new is not None and (new.load.type_v, new.load.flash_attn) == ("q8_0", True)
    dialog.editors["temperature"].setValue(0.3)
    dialog.editors["mode"].setCurrentText("keep_last")
    new = dialog.result_settings()
    assert new is not None and new.sampler.temperature == 0.3 and new.history.mode == "keep_last"


def test_replies_render_as_commonmark_while_streaming_and_after(qtbot):
    from vllmchat.ui.chat.markdown_render import render
    from vllmchat.ui.chat.message_widget import STREAM_RENDER_MS, MessageWidget

    unclosed = "Here:\n\n```python\n# a comment\nx = 1\n"
    html, blocks = render(unclosed)
    assert blocks == ["# a comment\nx = 1"]  # the fence runs to the end of the message
    assert "<h1" not in html and "a comment" in html
    html, _ = render("| a | b |\n|---|---|\n| 1 | 2 |\n\n<b>raw</b> ~~gone~~")
    assert "<table" in html and "<td>1</td>" in html
    assert "&lt;b&gt;raw" in html and "<s>gone</s>" in html
    widget = MessageWidget("assistant", "")
    qtbot.addWidget(widget)
    for piece in ("Here:\n\n", "```python\n", "# a comment\n", "x = 1\n"):
        widget.append_plain(piece)
    qtbot.wait(STREAM_RENDER_MS + 100)
    assert widget.code_blocks == ["# a comment\nx = 1"] and not widget.complete
    streaming = widget.body.toHtml()
    widget.set_markdown(widget.text)
    assert widget.body.toHtml() == streaming  # the same look once complete
