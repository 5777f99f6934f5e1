"""Attachments in the real window, offscreen, on the demo model: the 📎 button, a drop
and a paste of a file, the chip by the input, the chip in the sent message that opens
the text, and the passages chip of a reply answered from a large document."""

from __future__ import annotations

import random

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QGuiApplication
from PySide6.QtWidgets import QApplication, QFileDialog

from vllmchat.bench.conversations.attach_bench import PLANTED, filler
from vllmchat.ui.chat.attachments import TextViewer

TIMEOUT = 60_000


def _files(*paths) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def test_button_drop_and_paste_ask_to_attach(qtbot, tmp_path, monkeypatch):
    """The file dialog is replaced by its answer (a modal dialog cannot be clicked
    offscreen); the drag and drop and the paste are real Qt events and the real clipboard."""
    from vllmchat.ui.chat.chat_input import ChatInput

    box = ChatInput()
    qtbot.addWidget(box)
    box.show()
    asked: list[str] = []
    box.attach_requested.connect(asked.append)
    chosen = tmp_path / "a.md"
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(chosen), ""))
    qtbot.mouseClick(box.attach, Qt.MouseButton.LeftButton)
    dropped = tmp_path / "b.pdf"
    mime, copy = _files(dropped), Qt.DropAction.CopyAction
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    for event in (
        QDragEnterEvent(QPoint(10, 10), copy, mime, buttons, keys),
        QDragMoveEvent(QPoint(10, 10), copy, mime, buttons, keys),
        QDropEvent(QPointF(10, 10), copy, mime, buttons, keys),
    ):
        QApplication.sendEvent(box.edit.viewport(), event)
    pasted = tmp_path / "c.txt"
    QGuiApplication.clipboard().setMimeData(_files(pasted))
    box.edit.paste()
    assert asked == [str(chosen), str(dropped), str(pasted)]
    assert box.edit.toPlainText() == ""  # nothing of the files was typed into the box
    QGuiApplication.clipboard().setText("plain words")
    box.edit.paste()
    assert box.edit.toPlainText() == "plain words" and len(asked) == 3


@pytest.fixture
def window(demo_window):
    return demo_window[0]


def _attach(qtbot, w, path) -> None:
    n = len(w.input.pending.chips)
    w.input.attach_requested.emit(str(path))
    qtbot.waitUntil(lambda: len(w.input.pending.chips) > n, timeout=TIMEOUT)


def _send(qtbot, w, text: str) -> None:
    with qtbot.waitSignal(w.turn_ended, timeout=TIMEOUT):
        w.input.edit.setPlainText(text)
        w.input._submit()


def test_a_document_chip_waits_by_the_input_then_opens_from_its_message(qtbot, tmp_path, window):
    w = window
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\nThe boat is called Marisol.\n")
    bad = tmp_path / "tool.txt"
    bad.write_bytes(b"\x7fELF" + bytes(range(256)))
    w.input.attach_requested.emit(str(bad))
    qtbot.waitUntil(lambda: "binary data" in w.statusBar().currentMessage(), timeout=TIMEOUT)
    assert not w.input.pending.chips
    _attach(qtbot, w, doc)
    chip = w.input.pending.chips[0]
    assert "notes.md" in chip.text() and w.input.pending.isVisible()
    _send(qtbot, w, "What is the boat called?")
    assert not w.input.pending.chips
    assert "document.svg" in w.status_line.context_label.text()  # the documents' share, its icon
    user = next(m for m in w.chat.messages() if m.role == "user")
    assert user.chips is not None and "notes.md" in user.chips.chips[0].text()
    qtbot.mouseClick(user.chips.chips[0], Qt.MouseButton.LeftButton)
    viewer = w.attached.viewers[-1]
    assert isinstance(viewer, TextViewer) and "Marisol" in viewer.view.toPlainText()
    viewer.close()
    w.render_conversation()  # reopened from the store, the chip is there again
    user = next(m for m in w.chat.messages() if m.role == "user")
    assert user.chips is not None and len(user.chips.chips) == 1


def test_a_pending_chip_is_taken_back_and_a_reply_shows_its_passages(qtbot, tmp_path, window):
    w = window
    paragraphs = filler(random.Random(5), 500)
    sentence, question = PLANTED[3]
    paragraphs[40] += " " + sentence
    big = tmp_path / "archive.md"
    big.write_text("# Archive\n\n" + "\n\n".join(paragraphs))
    small = tmp_path / "extra.txt"
    small.write_text("Unneeded.")
    _attach(qtbot, w, small)
    chip = w.input.pending.chips[0]
    w.input.pending.removed.emit(chip.key)
    qtbot.waitUntil(lambda: not w.input.pending.chips, timeout=TIMEOUT)
    _attach(qtbot, w, big)
    assert "by passages" in w.input.pending.chips[0].text()
    _send(qtbot, w, question)
    reply = [m for m in w.chat.messages() if m.role == "assistant"][-1]
    assert reply.chips is not None and "passages" in reply.chips.chips[0].text()
    qtbot.mouseClick(reply.chips.chips[0], Qt.MouseButton.LeftButton)
    assert "Tilburg" in w.attached.viewers[-1].view.toPlainText()
    w.attached.viewers[-1].close()
