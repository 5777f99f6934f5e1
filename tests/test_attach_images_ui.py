"""Images in the real window, offscreen: a picture pasted from the real clipboard is
attached as a PNG file; on the demo model with a synthetic projector
(``bench/synthetic/synth_mmproj.py``), an image's chip by the input and in its sent
message shows a thumbnail and opens the picture."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage

from tests.test_attach_ui import TIMEOUT, _attach, _send
from vllmchat.bench.synthetic.synth_mmproj import png_bytes, write_gemma3_mmproj
from vllmchat.ui.chat.attachments import ImageViewer


def test_a_pasted_picture_is_attached_as_a_png_file(qtbot):
    from vllmchat.ui.chat.chat_input import ChatInput

    box = ChatInput()
    qtbot.addWidget(box)
    box.show()
    asked: list[str] = []
    box.attach_requested.connect(asked.append)
    picture = QImage(30, 20, QImage.Format.Format_RGB32)
    picture.fill(QColor("teal"))
    QGuiApplication.clipboard().setImage(picture)
    box.edit.paste()
    assert len(asked) == 1 and asked[0].endswith(".png")
    back = QImage(asked[0])
    assert back.width() == 30 and back.height() == 20
    assert Path(asked[0]).read_bytes().startswith(b"\x89PNG")
    assert box.edit.toPlainText() == ""


def test_an_image_chip_shows_a_thumbnail_and_opens_the_picture(qtbot, tmp_path, demo_model):
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.store.store import ConversationStore
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache
    from vllmchat.ui.window.main_window import MainWindow

    projector = write_gemma3_mmproj(tmp_path / "mmproj-synth.gguf", 576)
    store = ConversationStore(tmp_path / "c.sqlite3")
    settings = AppSettings.of(
        model_path=str(demo_model),
        mmproj_path=str(projector),
        n_ctx=2048,
        n_threads=2,
        max_tokens=8,
        temperature=0.0,
    )
    w = MainWindow(store, settings, KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(w)
    w.show()
    try:
        with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
            w.start()
        qtbot.waitUntil(lambda: w.desc is not None, timeout=TIMEOUT)
        photo = tmp_path / "photo.png"
        photo.write_bytes(png_bytes(120, 80, seed=7))
        _attach(qtbot, w, photo)
        chip = w.input.pending.chips[0]
        assert chip.has_thumbnail and "photo.png" in chip.text() and "120×80" in chip.text()
        _send(qtbot, w, "What is in it?")
        assert not w.input.pending.chips
        user = next(m for m in w.chat.messages() if m.role == "user")
        assert user.chips is not None and user.chips.chips[0].has_thumbnail
        qtbot.mouseClick(user.chips.chips[0], Qt.MouseButton.LeftButton)
        viewer = w.attached.viewers[-1]
        assert isinstance(viewer, ImageViewer)
        assert viewer.picture.pixmap().width() == 120
        viewer.close()
    finally:
        w.close()
        store.close()
