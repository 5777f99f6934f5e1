"""Attachments in the window: chips (a document or an image waiting for the next
message, or one in a message, or the passages a reply was given) and the read-only
viewers they open; an image pasted from the clipboard becomes a PNG file to attach."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QContextMenuEvent, QIcon, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.ui.common.icons import INLINE_SIDE, icon


def file_paths(mime: QMimeData) -> list[str]:
    """The local files a drop or a paste carries (none: it is text)."""
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]


THUMBNAIL_SIDE = 40


def pasted_image(mime: QMimeData, folder: Path | None = None) -> str | None:
    """A pasted picture (a screenshot, an image copied from a browser) written as a PNG
    file to attach (its path), or None when the clipboard holds no image."""
    if not mime.hasImage():
        return None
    image = mime.imageData()
    if not isinstance(image, QImage) or image.isNull():
        return None
    folder = folder or Path(tempfile.gettempdir()) / "vllmchat-pasted"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / time.strftime("pasted-%Y%m%d-%H%M%S.png")
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(time.strftime(f"pasted-%Y%m%d-%H%M%S-{n}.png"))
    saved = image.save(str(path), "PNG")  # type: ignore[call-overload]  # (str works)
    return str(path) if saved else None


def thumbnail(data: bytes, side: int = THUMBNAIL_SIDE) -> QPixmap | None:
    """An image's bytes as a small picture (None when Qt cannot read them)."""
    pixmap = QPixmap()
    if not pixmap.loadFromData(data):
        return None
    return pixmap.scaled(
        side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
    )


class AttachmentChip(QToolButton):
    """A name with its detail beside an image's thumbnail or the document's icon; a
    click opens it, a right-click (when removable) takes it back."""

    opened = Signal(int)
    removed = Signal(int)

    def __init__(
        self,
        key: int,
        name: str,
        detail: str = "",
        *,
        removable: bool = False,
        image: bytes | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.key = key
        picture = thumbnail(image) if image else None
        self.has_thumbnail = picture is not None
        if picture is not None:
            self.setIcon(QIcon(picture))
            self.setIconSize(QSize(THUMBNAIL_SIDE, THUMBNAIL_SIDE))
        else:  # an image Qt cannot draw, or a document: their icons
            self.setIcon(icon("image" if image else "document"))
            self.setIconSize(QSize(INLINE_SIDE, INLINE_SIDE))
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.setText(name + (f" · {detail}" if detail else ""))
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

    def add(
        self,
        key: int,
        name: str,
        detail: str = "",
        *,
        removable: bool = False,
        image: bytes | None = None,
    ) -> None:
        chip = AttachmentChip(key, name, detail, removable=removable, image=image, parent=self)
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


class ImageViewer(QDialog):
    """An attached image at its size (scrolled when larger than the window)."""

    def __init__(self, title: str, data: bytes, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(720, 560)
        layout = QVBoxLayout(self)
        self.picture = QLabel()
        pixmap = QPixmap()
        if pixmap.loadFromData(data):
            self.picture.setPixmap(pixmap)
        else:
            self.picture.setText("This image cannot be shown here (the model was given it).")
        scroll = QScrollArea()
        scroll.setWidget(self.picture)
        layout.addWidget(scroll)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
