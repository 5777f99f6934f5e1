"""The conversation view: one widget per message; streaming appends to the last only."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "summary": "Summary"}


def with_copy_links(markdown: str) -> tuple[str, list[str]]:
    """Markdown with a "Copy" link before each code block, and the blocks' code."""
    blocks: list[str] = []

    def link(match: re.Match[str]) -> str:
        blocks.append(match.group(1))
        return f"[Copy code](copy:{len(blocks) - 1})\n\n{match.group(0)}"

    return _FENCE.sub(link, markdown), blocks


class MessageWidget(QFrame):
    """A message: who, the text (Markdown when complete), and its actions."""

    edit_requested = Signal(int)
    regenerate_requested = Signal()
    summary_edit_requested = Signal(int)

    def __init__(
        self,
        role: str,
        text: str = "",
        *,
        message_id: int | None = None,
        partial: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.role = role
        self.message_id = message_id
        self.regenerate_button: QPushButton | None = None
        self.text = text
        self._code: list[str] = []
        self.setObjectName(f"message-{role}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        top = QHBoxLayout()
        self.who = QLabel(f"<b>{ROLE_NAMES.get(role, role)}</b>")
        self.note = QLabel("(stopped)" if partial else "")
        self.note.setStyleSheet("color: #a60;")
        self.note.setMinimumWidth(80)
        top.addWidget(self.who)
        top.addWidget(self.note)
        top.addStretch()
        self.buttons = QHBoxLayout()
        top.addLayout(self.buttons)
        layout.addLayout(top)
        self.body = QTextBrowser()
        self.body.setOpenLinks(False)
        self.body.anchorClicked.connect(self._on_link)
        self.body.setFrameShape(QFrame.Shape.NoFrame)
        self.body.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.body.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        layout.addWidget(self.body)
        self._add_actions()
        self.set_markdown(text)

    def _add_actions(self) -> None:
        if self.role == "user" and self.message_id is not None:
            self.enable_edit()
        if self.role == "summary" and self.message_id is not None:
            self._button("Edit summary", lambda: self.summary_edit_requested.emit(self.message_id))
        self._button("Copy", lambda: QGuiApplication.clipboard().setText(self.text))

    def _button(self, label: str, slot: object) -> QPushButton:
        button = QPushButton(label)
        button.setFlat(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        self.buttons.addWidget(button)
        return button

    def enable_edit(self) -> None:
        """An Edit action (user messages, once they have their id in the store)."""
        self._button("Edit", lambda: self.edit_requested.emit(self.message_id))

    def add_regenerate(self) -> None:
        self.regenerate_button = self._button("Regenerate", self.regenerate_requested.emit)

    def drop_regenerate(self) -> None:
        """Only the last reply can be regenerated."""
        button = self.regenerate_button
        if button is not None:
            self.buttons.removeWidget(button)
            button.deleteLater()
            self.regenerate_button = None

    def set_markdown(self, text: str) -> None:
        """Render the whole message (once, when it is complete)."""
        self.text = text
        markdown, self._code = with_copy_links(text)
        self.body.setMarkdown(markdown)
        QTimer.singleShot(0, self, self._fit_height)  # dropped if the message is removed

    def append_plain(self, text: str) -> None:
        """Append streamed text at the end, without re-rendering."""
        self.text += text
        cursor = self.body.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)

    def set_partial(self, partial: bool) -> None:
        self.note.setText("(stopped)" if partial else "")

    def _on_link(self, url: QUrl) -> None:
        if url.scheme() == "copy":
            index = int(url.path() or url.toString().split(":", 1)[1])
            QGuiApplication.clipboard().setText(self._code[index])

    def _fit_height(self) -> None:
        """Grow with the text. (The browser reflows on resize and signals the new size;
        overriding resizeEvent to do this re-enters PySide6 and corrupts refcounts.)"""
        height = int(self.body.document().size().height()) + 6
        if height != self.body.height():
            self.body.setFixedHeight(max(24, height))


class ChatView(QScrollArea):
    """All messages of the current branch, newest at the bottom."""

    edit_requested = Signal(int)
    regenerate_requested = Signal()
    summary_edit_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.inner = QWidget()
        self.column = QVBoxLayout(self.inner)
        self.column.addStretch()
        self.setWidget(self.inner)
        self.streaming: MessageWidget | None = None
        self._follow = True
        self.verticalScrollBar().rangeChanged.connect(self._keep_at_bottom)

    def messages(self) -> list[MessageWidget]:
        items = (self.column.itemAt(i) for i in range(self.column.count() - 1))
        return [w for item in items if item and isinstance(w := item.widget(), MessageWidget)]

    def clear(self) -> None:
        while self.column.count() > 1:
            item = self.column.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.streaming = None

    def add_message(
        self, role: str, text: str, *, message_id: int | None = None, partial: bool = False
    ) -> MessageWidget:
        widget = MessageWidget(role, text, message_id=message_id, partial=partial)
        widget.edit_requested.connect(self.edit_requested)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.summary_edit_requested.connect(self.summary_edit_requested)
        self.column.insertWidget(self.column.count() - 1, widget)
        self._follow = True
        return widget

    def start_reply(self) -> MessageWidget:
        self.streaming = self.add_message("assistant", "")
        return self.streaming

    def append_token(self, text: str) -> None:
        if self.streaming is None:
            self.start_reply()
        assert self.streaming is not None
        self.streaming.append_plain(text)

    def finish_reply(self, text: str, *, partial: bool) -> None:
        if self.streaming is None:
            self.start_reply()
        assert self.streaming is not None
        self.streaming.set_markdown(text)
        self.streaming.set_partial(partial)
        for widget in self.messages():
            widget.drop_regenerate()
        self.streaming.add_regenerate()
        self.streaming = None

    def set_message_id(self, message_id: int, role: str) -> None:
        """Give this turn's newest message of ``role`` its id in the store."""
        pending = [w for w in self.messages() if w.role == role and w.message_id is None]
        if not pending:
            return
        widget = pending[-1]
        widget.message_id = message_id
        if role == "user":
            widget.enable_edit()

    def discard_reply(self) -> None:
        """Remove the reply being streamed (a turn that failed before any text)."""
        if self.streaming is not None:
            self._remove(self.streaming)
            self.streaming = None

    def remove_last_reply(self) -> None:
        """Remove the last reply (it is being regenerated; the store keeps it as a branch)."""
        widgets = self.messages()
        if widgets and widgets[-1].role == "assistant":
            self._remove(widgets[-1])

    def remove_from(self, message_id: int) -> None:
        """Remove this message and everything after it (it is being edited)."""
        widgets = self.messages()
        index = next((i for i, w in enumerate(widgets) if w.message_id == message_id), None)
        for widget in widgets[index:] if index is not None else []:
            self._remove(widget)

    def insert_summary(self, text: str, summary_id: int | None) -> None:
        """Show a new summary, before the reply that is still streaming."""
        self.add_message("summary", text, message_id=summary_id)
        if self.streaming is not None:
            self.column.removeWidget(self.streaming)
            self.column.insertWidget(self.column.count() - 1, self.streaming)

    def _remove(self, widget: MessageWidget) -> None:
        self.column.removeWidget(widget)
        widget.deleteLater()

    def _keep_at_bottom(self, _low: int, high: int) -> None:
        bar = self.verticalScrollBar()
        if self._follow or bar.value() >= bar.maximum() - 40:
            QTimer.singleShot(0, bar, lambda: bar.setValue(bar.maximum()))
            self._follow = False
