"""A fold in a reply's bubble: a header button over a plain-text body, hidden until a
click unfolds it (the thinking, a tool call)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget


class Fold(QWidget):
    """``header`` (a checkable arrow button) and ``body`` (selectable plain text)."""

    def __init__(
        self, *, body_style: str, bottom_margin: int = 0, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, bottom_margin)
        self.header = QToolButton()
        self.header.setCheckable(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setArrowType(Qt.ArrowType.RightArrow)
        self.header.setAutoRaise(True)
        self.header.toggled.connect(self._toggle)
        self.body = QLabel()
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setTextFormat(Qt.TextFormat.PlainText)
        self.body.setStyleSheet(f"color: #777; {body_style} padding-left: 18px;")
        self.body.hide()
        layout.addWidget(self.header, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)

    def _toggle(self, unfolded: bool) -> None:
        self.header.setArrowType(Qt.ArrowType.DownArrow if unfolded else Qt.ArrowType.RightArrow)
        self.body.setVisible(unfolded)
