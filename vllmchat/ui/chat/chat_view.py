"""The conversation view. Only the newest messages have widgets; older ones load a page
at a time as the user scrolls up (or when search jumps to one), so opening a long
conversation and streaming into it cost the same as for a short one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from vllmchat.core.app.conversations.service import Message, Summary
from vllmchat.ui.chat.message_widget import MessageWidget
from vllmchat.ui.common.theme import is_dark, view_style

PAGE = 20  # messages given widgets at a time (more than a screenful)


@dataclass(frozen=True)
class HistoryItem:
    """A stored message (or summary) waiting for its widget."""

    role: str
    text: str
    message_id: int | None = None
    partial: bool = False
    regenerate: bool = False
    pinned: bool = False
    thinking: str = ""
    thinking_s: float | None = None


def history_items(messages: Sequence[Message], summaries: Sequence[Summary]) -> list[HistoryItem]:
    """A stored branch as the view shows it: each message, and each summary after the
    last message it covers; only the branch's last reply can be regenerated."""
    after = {s.last_message_id: s for s in summaries}
    items: list[HistoryItem] = []
    for m in messages:
        last_reply = m is messages[-1] and m.role == "assistant"
        thinking_s = m.stats.get("thinking_s")
        items.append(
            HistoryItem(
                m.role, m.content, m.id, m.partial, last_reply, m.pinned, m.thinking, thinking_s
            )
        )
        if m.id in after:
            items.append(HistoryItem("summary", after[m.id].content, after[m.id].id))
    return items


class ChatView(QScrollArea):
    """The messages of the current branch, newest at the bottom."""

    edit_requested = Signal(int)
    regenerate_requested = Signal()
    summary_edit_requested = Signal(int)
    pin_requested = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.decorate: Callable[[MessageWidget], None] | None = None  # e.g. attachment chips
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.inner = QWidget()
        self.column = QVBoxLayout(self.inner)
        self.column.setSpacing(10)
        self.older = QLabel("")
        self.older.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.older.setStyleSheet("color: gray;")
        self.column.addWidget(self.older)
        self.column.addStretch()
        self.setWidget(self.inner)
        self.streaming: MessageWidget | None = None
        self.dark = is_dark()
        self.inner.setStyleSheet(view_style(self.dark))
        self._pending: list[HistoryItem] = []  # older messages without widgets, oldest first
        self._follow = True
        self._anchor: tuple[MessageWidget, int] | None = None  # a message held in place
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range)
        bar.valueChanged.connect(self._on_scroll)

    # -- contents -----------------------------------------------------------------------
    def messages(self) -> list[MessageWidget]:
        items = (self.column.itemAt(i) for i in range(1, self.column.count() - 1))
        return [w for item in items if item and isinstance(w := item.widget(), MessageWidget)]

    @property
    def unloaded(self) -> int:
        """Older messages that have no widget yet."""
        return len(self._pending)

    def clear(self) -> None:
        while self.column.count() > 2:
            item = self.column.takeAt(1)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.hide()  # gone now, not when the event loop gets to deleting it
                widget.deleteLater()
        self._pending = []
        self._show_older_note()
        self.streaming = None

    def set_history(self, items: list[HistoryItem]) -> None:
        """Show a conversation: widgets for the newest page, the rest on demand."""
        self.clear()
        self._pending = list(items[:-PAGE]) if len(items) > PAGE else []
        for item in items[-PAGE:]:
            self._insert(item, self.column.count() - 1)
        self._show_older_note()
        self._follow = True

    def load_older(self, count: int = PAGE) -> int:
        """Give the next ``count`` older messages widgets, keeping what is on screen still."""
        if not self._pending:
            return 0
        take = self._pending[-count:]
        del self._pending[-count:]
        shown = self.messages()
        if shown:  # keep the message at the top where it is while the page lays out
            self._anchor = (shown[0], shown[0].y() - self.verticalScrollBar().value())
            QTimer.singleShot(300, self, self._release_anchor)
        for offset, item in enumerate(take):
            self._insert(item, 1 + offset)
        self._show_older_note()
        return len(take)

    def _release_anchor(self) -> None:
        self._hold()
        self._anchor = None

    def _hold(self) -> None:
        if self._anchor is not None:
            widget, offset = self._anchor
            self.verticalScrollBar().setValue(widget.y() - offset)

    def jump_to(self, message_id: int) -> MessageWidget | None:
        """Scroll to a message, loading older pages until it has a widget."""
        while True:
            found = next((w for w in self.messages() if w.message_id == message_id), None)
            if found is not None or not self.load_older():
                break
        if found is not None:
            self._follow = False
            self._anchor = None
            QTimer.singleShot(0, self, lambda: self.ensureWidgetVisible(found, 0, 60))
            found.setFocus()
        return found

    def _show_older_note(self) -> None:
        n = len(self._pending)
        self.older.setText(f"{n:,} earlier messages — scroll up to see them" if n else "")
        self.older.setVisible(bool(n))

    def _insert(self, item: HistoryItem, index: int) -> MessageWidget:
        widget = MessageWidget(
            item.role, item.text, message_id=item.message_id, partial=item.partial, dark=self.dark
        )
        widget.edit_requested.connect(self.edit_requested)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.summary_edit_requested.connect(self.summary_edit_requested)
        widget.pin_requested.connect(self.pin_requested)
        widget.set_pinned(item.pinned)
        if self.decorate is not None:
            self.decorate(widget)
        if item.thinking:
            widget.set_thought(item.thinking, item.thinking_s)
        if item.regenerate:
            widget.add_regenerate()
        self.column.insertWidget(index, widget, 0, Qt.AlignmentFlag.AlignHCenter)
        return widget

    def add_message(
        self, role: str, text: str, *, message_id: int | None = None, partial: bool = False
    ) -> MessageWidget:
        widget = self._insert(HistoryItem(role, text, message_id, partial), self.column.count() - 1)
        self._follow = True
        return widget

    def apply_theme(self, dark: bool) -> None:
        """Recolour every message (the system switched between light and dark)."""
        self.dark = dark
        self.inner.setStyleSheet(view_style(dark))
        for widget in self.messages():
            widget.apply_theme(dark)

    # -- a turn ---------------------------------------------------------------------------
    def start_reply(self) -> MessageWidget:
        self.streaming = self.add_message("assistant", "")
        self.streaming.complete = False
        return self.streaming

    def append_token(self, text: str) -> None:
        if self.streaming is None:
            self.start_reply()
        assert self.streaming is not None
        self.streaming.append_plain(text)

    def append_thinking(self, text: str) -> None:
        if self.streaming is None:
            self.start_reply()
        assert self.streaming is not None
        self.streaming.append_thinking(text)

    def thought_for(self, seconds: float) -> None:
        if self.streaming is not None:
            self.streaming.set_thought(None, seconds)

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
        widget.set_pinned(False)  # the pin action works once the store has it
        if role == "user":
            widget.enable_edit()
        if self.decorate is not None:
            self.decorate(widget)

    def discard_reply(self) -> None:
        """Remove the reply being streamed (a turn that failed before any text)."""
        if self.streaming is not None:
            self._remove(self.streaming)
            self.streaming = None

    def remove_unsaved_message(self) -> None:
        """Remove the last message when it never reached the store (no id)."""
        widgets = self.messages()
        if widgets and widgets[-1].role == "user" and widgets[-1].message_id is None:
            self._remove(widgets[-1])

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

    def insert_summary(
        self, text: str, summary_id: int | None, after_id: int | None = None
    ) -> None:
        """Show a new summary after the last message it covers (when shown), else at
        the end; always before the reply that is still streaming."""
        widget = self.add_message("summary", text, message_id=summary_id)
        shown = [w for w in self.messages() if w.role != "summary"]
        anchor = next((w for w in shown if w.message_id == after_id), None)
        if anchor is not None and anchor is not shown[-1]:
            self.column.removeWidget(widget)
            self.column.insertWidget(
                self.column.indexOf(anchor) + 1, widget, 0, Qt.AlignmentFlag.AlignHCenter
            )
        if self.streaming is not None:
            self.column.removeWidget(self.streaming)
            self.column.insertWidget(
                self.column.count() - 1, self.streaming, 0, Qt.AlignmentFlag.AlignHCenter
            )

    def _remove(self, widget: MessageWidget) -> None:
        self.column.removeWidget(widget)
        widget.hide()
        widget.deleteLater()

    # -- scrolling ------------------------------------------------------------------------
    def _on_scroll(self, value: int) -> None:
        if value <= 0 and self._pending and self._anchor is None:
            QTimer.singleShot(0, self, self.load_older)

    def _on_range(self, _low: int, high: int) -> None:
        bar = self.verticalScrollBar()
        if self._anchor is not None:  # older messages came in above: stay on the same line
            self._hold()
            return
        if self._follow or bar.value() >= bar.maximum() - 40:
            QTimer.singleShot(0, bar, lambda: bar.setValue(bar.maximum()))
            self._follow = False
