"""The message box: Enter sends, Shift+Enter breaks the line, Esc stops."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QWidget


class MessageEdit(QPlainTextEdit):
    submitted = Signal()
    stop_requested = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submitted.emit()
            return
        if key == Qt.Key.Key_Escape:
            self.stop_requested.emit()
            return
        super().keyPressEvent(event)


class ChatInput(QWidget):
    """The box with Send and Stop."""

    send_requested = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = MessageEdit()
        self.edit.setPlaceholderText("Message (Enter sends, Shift+Enter for a new line, Esc stops)")
        self.edit.setFixedHeight(72)
        self.send = QPushButton("Send")
        self.stop = QPushButton("Stop")
        self.stop.setEnabled(False)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.send)
        layout.addWidget(self.stop)
        self.edit.submitted.connect(self._submit)
        self.send.clicked.connect(self._submit)
        self.edit.stop_requested.connect(self.stop_requested)
        self.stop.clicked.connect(self.stop_requested)
        self.generating = False

    def _submit(self) -> None:
        text = self.edit.toPlainText()
        if text.strip() and self.send.isEnabled():
            self.edit.clear()
            self.send_requested.emit(text)

    def set_generating(self, generating: bool) -> None:
        self.generating = generating
        self.send.setEnabled(not generating)
        self.stop.setEnabled(generating)

    def set_loading(self, loading: bool) -> None:
        self.edit.setEnabled(not loading)
        self.send.setEnabled(not loading and not self.generating)
        self.edit.setPlaceholderText(
            "Loading the model…"
            if loading
            else "Message (Enter sends, Shift+Enter for a new line, Esc stops)"
        )
