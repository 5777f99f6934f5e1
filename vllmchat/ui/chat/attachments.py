"""Attachments in the window: chips (a document waiting for the next message, or one
in a message, or the passages a reply was given) and the read-only viewer they open."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Signal
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QPlainTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


def file_paths(mime: QMimeData) -> list[str]:
    """The local files a drop or a paste carries (none: it is text)."""
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]


class AttachmentChip(QToolButton):
    """A name with its detail; a click opens it, × (when removable) takes it back."""

    opened = Signal(int)
    removed = Signal(int)

    def __init__(
        self, key: int, name: str, detail: str = "", *, removable: bool = False,
        parent: QWidget | None = None,
    ) -> None:  # fmt: skip
        super().__init__(parent)
        self.key = key
        self.setText(f"📎 {name}" + (f" · {detail}" if detail else ""))
        self.setToolTip(f"Open {name}" + (" (right-click to remove)" if removable else ""))
        self.setObjectName("attachment-chip")
        self.removable = removable
        self.clicked.connect(lambda: self.opened.emit(self.key))

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        if self.removable:
            self.removed.emit(self.key)


class ChipRow(QWidget):
    """Chips in a row (hidden when empty)."""

    opened = Signal(int)
    removed = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.addStretch(1)
        self.chips: list[AttachmentChip] = []
        self.setVisible(False)

    def add(self, key: int, name: str, detail: str = "", *, removable: bool = False) -> None:
        chip = AttachmentChip(key, name, detail, removable=removable, parent=self)
        chip.opened.connect(self.opened)
        chip.removed.connect(self.removed)
        self.row.insertWidget(len(self.chips), chip)
        self.chips.append(chip)
        self.setVisible(True)

    def remove(self, key: int) -> None:
        for chip in [c for c in self.chips if c.key == key]:
            self.chips.remove(chip)
            chip.deleteLater()
        self.setVisible(bool(self.chips))

    def clear(self) -> None:
        for chip in list(self.chips):
            self.remove(chip.key)


class TextViewer(QDialog):
    """A document's text, or the passages a reply was given, to read and copy."""

    def __init__(self, title: str, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(720, 560)
        layout = QVBoxLayout(self)
        self.view = QPlainTextEdit(text)
        self.view.setReadOnly(True)
        layout.addWidget(self.view)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
