"""The message box: Enter sends, Shift+Enter breaks the line, Esc stops; files are
attached by the paper-clip button, by dropping them on it or by pasting them (a pasted
picture is attached as a PNG file). Controls can sit beside Send (the voice's), and words
heard while the user speaks show greyed at the end of the box until the transcript lands."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
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
    typed = Signal()
    """The user typed in the box (a key that writes or deletes text)."""

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
        writes = bool(event.text()) and event.text().isprintable()
        if writes or key in (Qt.Key.Key_Backspace, Qt.Key.Key_Delete):
            self.typed.emit()
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
        self.notice = QLabel()  # a line about the box (what the microphone did), for a while
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.timeout.connect(self.notice.hide)
        column.addWidget(self.notice)
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
        self.beside_send = QHBoxLayout()  # the voice's controls, when the window adds them
        layout.addLayout(self.beside_send)
        layout.addWidget(self.send)
        layout.addWidget(self.stop)
        self.edit.submitted.connect(self._submit)
        self.send.clicked.connect(self._submit)
        self.edit.stop_requested.connect(self.stop_requested)
        self.stop.clicked.connect(self.stop_requested)
        self.generating = False
        self.partial: QTextCursor | None = None  # the greyed words heard so far, selected
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

    def submit(self) -> None:
        """Send what the box holds, as Enter does (when sending is allowed)."""
        self._submit()

    def _submit(self) -> None:
        text = self.typed_text()
        if (text.strip() or self.pending.chips) and self.send.isEnabled():
            self.clear_partial()
            self.edit.clear()
            self.send_requested.emit(text)

    def show_notice(self, text: str, ms: int = 20_000) -> None:
        """A line above the box for ``ms`` (what happened to what the user said)."""
        self.notice.setText(text)
        self.notice.setVisible(bool(text))
        self._notice_timer.start(ms)

    def add_beside_send(self, widget: QWidget) -> None:
        """Put ``widget`` between the box and Send."""
        self.beside_send.addWidget(widget)

    # -- words heard while the user speaks -------------------------------------------
    def typed_text(self) -> str:
        """The box's text without the greyed words heard so far."""
        text = self.edit.toPlainText()
        if self.partial is None:
            return text
        return text[: self.partial.selectionStart()] + text[self.partial.selectionEnd() :]

    def show_partial(self, text: str) -> None:
        """Show ``text`` greyed at the end of the box, in place of the last words shown;
        what the user types stays where it is, in its own colour."""
        grey = QTextCharFormat()
        grey.setForeground(self.edit.palette().color(QPalette.ColorRole.PlaceholderText))
        grey.setFontItalic(True)
        cursor = self.partial
        if cursor is None or not cursor.hasSelection():  # none yet, or the box was reset
            cursor = QTextCursor(self.edit.document())
            cursor.movePosition(QTextCursor.MoveOperation.End)
        start = cursor.selectionStart()
        before = self.edit.toPlainText()[:start]
        spaced = text.strip()
        if spaced and before and not before[-1].isspace():
            spaced = " " + spaced
        cursor.beginEditBlock()
        cursor.removeSelectedText()
        cursor.insertText(spaced, grey)
        cursor.endEditBlock()
        cursor.setPosition(start)
        cursor.setPosition(start + len(spaced), QTextCursor.MoveMode.KeepAnchor)
        self.partial = cursor
        self._keep_typing_before(start)

    def clear_partial(self) -> None:
        """Take the greyed words away (the transcript, or nothing, takes their place)."""
        cursor, self.partial = self.partial, None
        if cursor is not None and cursor.hasSelection():
            cursor.removeSelectedText()

    def land(self, text: str) -> None:
        """Put a transcript at the end of the box, editable, in place of the greyed words;
        what was typed is kept."""
        self.clear_partial()
        text = text.strip()
        if not text:
            return
        before = self.edit.toPlainText()
        cursor = QTextCursor(self.edit.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText((" " if before and not before[-1].isspace() else "") + text)
        self.edit.setTextCursor(cursor)
        self.edit.setCurrentCharFormat(QTextCharFormat())
        self.edit.setFocus()

    def _keep_typing_before(self, start: int) -> None:
        """Keep the user's cursor out of the greyed words, and what they type plain."""
        mine = self.edit.textCursor()
        if mine.position() > start:
            mine.setPosition(start)
            self.edit.setTextCursor(mine)
        self.edit.setCurrentCharFormat(QTextCharFormat())

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
