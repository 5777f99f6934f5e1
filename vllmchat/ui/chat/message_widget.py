"""One message: who, the text (rendered Markdown with highlighted code once complete),
and its actions, coloured for the light or dark scheme."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from vllmchat.ui.chat.attachments import ChipRow
from vllmchat.ui.chat.markdown_render import render
from vllmchat.ui.chat.thinking_fold import ThinkingFold
from vllmchat.ui.common.icons import icon
from vllmchat.ui.common.theme import label_color

ROLE_NAMES = {"user": "You", "assistant": "Assistant", "summary": "Summary"}
STREAM_RENDER_MS = 250  # how often a streaming reply is rendered again
READABLE_WIDTH = 860  # px: lines stay readable on wide windows


class MessageWidget(QFrame):
    """A message: who, the text (Markdown when complete), and its actions."""

    edit_requested = Signal(int)
    regenerate_requested = Signal()
    summary_edit_requested = Signal(int)
    pin_requested = Signal(int, bool)
    """Pin (True) or unpin this message (its id)."""

    def __init__(
        self,
        role: str,
        text: str = "",
        *,
        message_id: int | None = None,
        partial: bool = False,
        dark: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.role = role
        self.message_id = message_id
        self.regenerate_button: QPushButton | None = None
        self.pin_button: QPushButton | None = None
        self.text = text
        self.dark = dark
        self.complete = True
        self.code_blocks: list[str] = []
        self._rerender = QTimer(self)
        self._rerender.setSingleShot(True)
        self._rerender.setInterval(STREAM_RENDER_MS)
        self._rerender.timeout.connect(self._render)
        self.setObjectName(f"message-{role}")
        self.setMaximumWidth(READABLE_WIDTH)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        top = QHBoxLayout()
        self.who = QLabel()
        self.note = QLabel("(stopped)" if partial else "")
        self.note.setStyleSheet("color: #c47f00;")
        self.note.setMinimumWidth(80)
        top.addWidget(self.who)
        top.addWidget(self.note)
        top.addStretch()
        self.buttons = QHBoxLayout()
        top.addLayout(self.buttons)
        layout.addLayout(top)
        self.thinking = ThinkingFold()
        layout.addWidget(self.thinking)
        self.body = QTextBrowser()
        self.body.setOpenLinks(False)
        self.body.anchorClicked.connect(self._on_link)
        self.body.setFrameShape(QFrame.Shape.NoFrame)
        self.body.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.body.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        layout.addWidget(self.body)
        self.chips: ChipRow | None = None  # attachments, or the passages a reply was given
        self._add_actions()
        self.apply_theme(dark, rerender=False)
        self.set_markdown(text)

    def sizeHint(self) -> QSize:
        """As wide as reads well: the view centres it and narrows it to fit."""
        hint = super().sizeHint()
        return QSize(READABLE_WIDTH, hint.height())

    def _add_actions(self) -> None:
        if self.role == "user" and self.message_id is not None:
            self.enable_edit()
        if self.role == "summary" and self.message_id is not None:
            self._button(
                "Edit summary", "summary", lambda: self.summary_edit_requested.emit(self.message_id)
            )
        if self.role in ("user", "assistant"):
            self.pin_button = self._button("Pin", "pin", self._toggle_pin)
            self.pin_button.setCheckable(True)
            self.pin_button.setEnabled(self.message_id is not None)
            self.pin_button.setToolTip("Pinned messages stay word for word in every prompt")
        self._button("Copy", "copy", lambda: QGuiApplication.clipboard().setText(self.text))

    def _button(
        self, label: str, icon_name: str, slot: object, *, first: bool = False
    ) -> QPushButton:
        button = QPushButton(icon(icon_name, self.dark), label)
        button.setProperty("icon_name", icon_name)
        button.setAccessibleName(f"{label} ({ROLE_NAMES.get(self.role, self.role).lower()})")
        button.setToolTip(label)
        button.setFlat(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        if first:
            self.buttons.insertWidget(0, button)
        else:
            self.buttons.addWidget(button)
        return button

    def _toggle_pin(self) -> None:
        if self.pin_button is not None and self.message_id is not None:
            self.pin_requested.emit(self.message_id, self.pin_button.isChecked())

    def set_pinned(self, pinned: bool) -> None:
        if self.pin_button is not None:
            self.pin_button.setChecked(pinned)
            self.pin_button.setText("Pinned" if pinned else "Pin")
            self.pin_button.setEnabled(self.message_id is not None)

    def enable_edit(self) -> None:
        """An Edit action (user messages, once they have their id in the store)."""
        self._button("Edit", "edit", lambda: self.edit_requested.emit(self.message_id), first=True)

    def add_regenerate(self) -> None:
        self.regenerate_button = self._button(
            "Regenerate", "regenerate", self.regenerate_requested.emit
        )

    def drop_regenerate(self) -> None:
        """Only the last reply can be regenerated."""
        button = self.regenerate_button
        if button is not None:
            self.buttons.removeWidget(button)
            button.deleteLater()
            self.regenerate_button = None

    def apply_theme(self, dark: bool, *, rerender: bool = True) -> None:
        """Colours for the light or dark scheme (code re-highlighted to match); the
        frame's colours come from the view's style sheet (``theme.view_style``)."""
        self.dark = dark
        for button in self.findChildren(QPushButton):
            if button.property("icon_name"):
                button.setIcon(icon(button.property("icon_name"), dark))
        color = label_color(self.role, dark)
        self.who.setText(f"<b style='color:{color}'>{ROLE_NAMES.get(self.role, self.role)}</b>")
        if rerender and self.complete:
            self.set_markdown(self.text)

    def set_markdown(self, text: str) -> None:
        """Render the whole message (when it is complete)."""
        self.text = text
        self.complete = True
        self._rerender.stop()
        self._render()

    def _render(self) -> None:
        html, self.code_blocks = render(self.text, dark=self.dark)
        self.body.setHtml(html)
        QTimer.singleShot(0, self, self._fit_height)  # dropped if the message is removed

    def append_plain(self, text: str) -> None:
        """Append streamed text at the end at once; the Markdown so far is rendered
        again a moment later (a few times a second), the same way as when complete."""
        self.complete = False
        self.text += text
        cursor = self.body.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        if not self._rerender.isActive():
            self._rerender.start()

    def append_thinking(self, text: str) -> None:
        """Thinking streamed before the answer (folded)."""
        self.thinking.append(text)

    def set_thought(self, text: str | None, seconds: float | None) -> None:
        """How long the model thought (and, from the store, what)."""
        self.thinking.set_thought(text, seconds)

    def chip_row(self) -> ChipRow:
        """The row of chips under the text (made on first use)."""
        if self.chips is None:
            self.chips = ChipRow(self)
            layout = self.layout()
            assert layout is not None
            layout.addWidget(self.chips)
        return self.chips

    def set_partial(self, partial: bool) -> None:
        self.note.setText("(stopped)" if partial else "")

    def _on_link(self, url: QUrl) -> None:
        if url.scheme() == "copy":
            index = int(url.path() or url.toString().split(":", 1)[1])
            QGuiApplication.clipboard().setText(self.code_blocks[index])

    def _fit_height(self) -> None:
        """Grow with the text. (The browser reflows on resize and signals the new size;
        overriding resizeEvent to do this re-enters PySide6 and corrupts refcounts.)"""
        height = int(self.body.document().size().height()) + 6
        if height != self.body.height():
            self.body.setFixedHeight(max(24, height))
