"""A reasoning model's thinking, folded above its answer: "Thinking…" while it
streams, "Thought for 12 s" once the answer begins; a click unfolds it."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from vllmchat.ui.chat.fold import Fold


class ThinkingFold(Fold):
    """A header button and the thinking's plain text, hidden until unfolded."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(body_style="font-style: italic;", bottom_margin=4, parent=parent)
        self.header.setAccessibleName("Show the thinking")
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
            self.header.setText(
                f"Thought for {self.seconds:.0f} s" if self.seconds >= 1 else "Thought for a moment"
            )
