"""An image refused because the model has no projector, in the real window offscreen on
the demo model: the window says why and offers the model picker filtered to models that
take images. The picker's modal ``exec`` is replaced by its answer (a modal dialog
cannot be clicked offscreen); the picker itself is the real one."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from tests.test_attach_ui import TIMEOUT
from vllmchat.bench.synthetic.synth_mmproj import png_bytes


def test_a_refused_image_offers_the_picker_of_models_with_vision(
    qtbot, tmp_path, demo_window, monkeypatch
):
    from vllmchat.ui.models.model_picker import ModelPicker

    w = demo_window[0]
    shown: list[ModelPicker] = []

    def answer(picker: ModelPicker) -> int:
        shown.append(picker)
        return 0

    monkeypatch.setattr(ModelPicker, "exec", answer)
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes(40, 30, seed=1))
    w.input.attach_requested.emit(str(photo))
    qtbot.waitUntil(lambda: w.attached.vision_offer is not None, timeout=TIMEOUT)
    box = w.attached.vision_offer
    assert box is not None and box.isVisible()
    assert "cannot see images" in box.text() and "projector" in box.text()
    assert "cannot see images" in w.statusBar().currentMessage()
    assert not w.input.pending.chips  # nothing was attached
    choose = next(b for b in box.buttons() if "sees images" in b.text())
    choose.click()
    assert len(shown) == 1 and shown[0].vision_only.isChecked()
    box.close()
    QApplication.processEvents()


def test_the_settings_dialog_sets_the_embedding_model(qtbot) -> None:
    from PySide6.QtWidgets import QLineEdit

    from vllmchat.core.app_settings import AppSettings
    from vllmchat.ui.dialogs.settings_dialog import SettingsDialog

    dialog = SettingsDialog(AppSettings.of(model_path=""))
    qtbot.addWidget(dialog)
    field = dialog.editors["embedding_model"]
    assert isinstance(field, QLineEdit) and field.text() == ""
    field.setText("/models/embed.gguf")
    new = dialog.result_settings()
    assert new is not None and new.embedding_model == "/models/embed.gguf"
    assert new.changes_from(dialog.original) == {"embedding_model": "/models/embed.gguf"}
    assert not new.needs_reload(dialog.original)  # the chat model stays loaded
