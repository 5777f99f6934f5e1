"""The message box: Enter sends, Shift+Enter breaks the line, Esc stops; files are
attached by the paper-clip button, by dropping them on it or by pasting them (a pasted
picture is attached as a PNG file)."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.ui.chat.attachments import ChipRow, file_paths, pasted_image
from vllmchat.ui.common.icons import icon
from vllmchat.ui.common.theme import ThemeWatcher

DOCUMENT_FILTER = (
    "Documents and images (*.pdf *.docx *.txt *.md *.png *.jpg *.jpeg *.webp *.gif);;"
    "Images (*.png *.jpg *.jpeg *.webp *.gif);;"
    "Documents (*.pdf *.docx *.txt *.md *.markdown *.rst *.csv *.json *.yaml *.yml *.toml "
    "*.py *.c *.h *.cpp *.hpp *.js *.ts *.java *.go *.rs *.rb *.sh *.sql *.html *.css);;"
    "All files (*)"
)


class MessageEdit(QPlainTextEdit):
    submitted = Signal()
    stop_requested = Signal()
    files_given = Signal(list)
    """Files dropped on the box or pasted into it (their paths)."""

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return (
            bool(file_paths(source)) or source.hasImage() or super().canInsertFromMimeData(source)
        )

    def insertFromMimeData(self, source: QMimeData) -> None:
        """A drop or a paste: files are attached, a picture too (as a PNG file), text is
        inserted."""
        paths = file_paths(source)
        if not paths and source.hasImage():
            picture = pasted_image(source)
            paths = [picture] if picture else []
        if paths:
            self.files_given.emit(paths)
        else:
            super().insertFromMimeData(source)

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
    attach_requested = Signal(str)
    """A file to attach to the next message (its path)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        self.pending = ChipRow()  # attachments waiting for the next message
        column.addWidget(self.pending)
        layout = QHBoxLayout()
        column.addLayout(layout)
        self.attach = QToolButton()
        self.attach.setIcon(icon("attach"))
        self.attach.setIconSize(QSize(18, 18))
        self.attach.setToolTip(
            "Attach a document or an image (or drop or paste a file or a picture on the box)"
        )
        self.attach.setAccessibleName("Attach a file")
        self.attach.clicked.connect(self._choose_file)
        layout.addWidget(self.attach)
        self.edit = MessageEdit()
        self.edit.files_given.connect(self._attach_all)
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
        self.theme = ThemeWatcher(self)
        self.theme.changed.connect(self._on_scheme)

    def _on_scheme(self, dark: bool) -> None:
        self.attach.setIcon(icon("attach", dark))

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Attach a file", "", DOCUMENT_FILTER)
        if path:
            self.attach_requested.emit(path)

    def _attach_all(self, paths: list[str]) -> None:
        for path in paths:
            self.attach_requested.emit(path)

    def _submit(self) -> None:
        text = self.edit.toPlainText()
        if (text.strip() or self.pending.chips) and self.send.isEnabled():
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
