"""A reasoning model's thinking, folded above its answer: "Thinking…" while it
streams, "Thought for 12 s" once the answer begins; a click unfolds it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget


class ThinkingFold(QWidget):
    """A header button and the thinking's plain text, hidden until unfolded."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 4)
        self.header = QToolButton()
        self.header.setCheckable(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setArrowType(Qt.ArrowType.RightArrow)
        self.header.setAutoRaise(True)
        self.header.setAccessibleName("Show the thinking")
        self.header.toggled.connect(self._toggle)
        self.body = QLabel()
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setTextFormat(Qt.TextFormat.PlainText)
        self.body.setStyleSheet("color: #777; font-style: italic; padding-left: 18px;")
        self.body.hide()
        layout.addWidget(self.header, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)
        self.text = ""
        self.seconds: float | None = None
        self._update_header()
        self.hide()

    def append(self, text: str) -> None:
        """More thinking, as it streams."""
        self.text += text
        self.body.setText(self.text.strip())
        self.show()

    def set_thought(self, text: str | None, seconds: float | None) -> None:
        """The thinking ended (``text`` None: keep what streamed)."""
        if text is not None:
            self.text = text
            self.body.setText(text.strip())
        self.seconds = seconds
        self._update_header()
        self.setVisible(bool(self.text.strip()))

    def _update_header(self) -> None:
        if self.seconds is None:
            self.header.setText("Thinking…")
        else:
            self.header.setText(f"Thought for {self.seconds:.0f} s" if self.seconds >= 1
                                else "Thought for a moment")  # fmt: skip

    def _toggle(self, unfolded: bool) -> None:
        self.header.setArrowType(Qt.ArrowType.DownArrow if unfolded else Qt.ArrowType.RightArrow)
        self.body.setVisible(unfolded)
