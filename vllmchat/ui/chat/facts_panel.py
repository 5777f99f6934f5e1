"""The facts panel: the open conversation's facts, kept word for word through
summaries; add one, reword one (double-click or F2), delete one.

The facts belong to the application layer (``app.conversations``): the panel sends
it intents (``add_fact``, ``edit_fact``, ``delete_fact``) and redraws from each
``FactsChanged`` it announces (from whichever thread changed them), so the panel never
holds a copy of its own; a refusal (``EditRefused``) is shown with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.conversations.service import ConversationChange, Conversations, Fact
from vllmchat.core.app.events import ConversationOpened, EditRefused
from vllmchat.core.conversations.events import FactsChanged
from vllmchat.core.conversations.memory.facts import MAX_FACT_CHARS

HINT = "Kept word for word when older turns are summarized."
TAKEN = "From your message; reword it to make it yours."
YOURS = "Written by you: in every prompt."


class _OneLine(QStyledItemDelegate):
    """Rewording happens in a one-line editor capped at a fact's length."""

    def createEditor(
        self,
        parent: QWidget,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> QWidget:
        editor = QLineEdit(parent)
        editor.setMaxLength(MAX_FACT_CHARS)
        return editor


class FactsPanel(QGroupBox):
    """The open conversation's facts, with Add, reword and Delete."""

    facts_changed = Signal(object)
    """``FactsChanged`` from the core (any thread); redrawn on the GUI thread."""

    def __init__(self, conversations: Conversations, parent: QWidget | None = None) -> None:
        super().__init__("Facts kept", parent)
        self.stored = conversations
        self.conversation_id: int | None = None
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.setSpacing(2)
        self.list.setAlternatingRowColors(True)  # a wrapped fact still reads as one
        self.list.setItemDelegate(_OneLine(self.list))
        self.list.setEditTriggers(
            QListWidget.EditTrigger.DoubleClicked | QListWidget.EditTrigger.EditKeyPressed
        )
        self.list.itemChanged.connect(self._reworded)
        self.list.currentRowChanged.connect(self._selection_changed)
        self.entry = QLineEdit()
        self.entry.setPlaceholderText("A fact to keep, e.g. I'm vegetarian")
        self.entry.setMaxLength(MAX_FACT_CHARS)
        self.entry.returnPressed.connect(self.add_entry)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add_entry)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        QShortcut(
            QKeySequence.StandardKey.Delete,
            self.list,
            self.delete_selected,
            context=Qt.ShortcutContext.WidgetShortcut,
        )
        self.note = QLabel(HINT)
        self.note.setWordWrap(True)
        under = QHBoxLayout()
        under.addWidget(QLabel("Double-click to reword."), 1)
        under.addWidget(self.delete_button)
        entry = QHBoxLayout()
        entry.addWidget(self.entry, 1)
        entry.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addLayout(under)
        layout.addLayout(entry)
        layout.addWidget(self.note)
        self.facts_changed.connect(self._on_changed)
        unsubscribe = conversations.subscribe(self._heard)
        self.destroyed.connect(lambda *_: unsubscribe())
        self._draw(())

    # -- what the core says ------------------------------------------------------------
    def show_conversation(self, conversation_id: int | None) -> None:
        """Show this conversation's facts (None: no conversation)."""
        self.conversation_id = conversation_id
        self.refresh()

    def on_conversation_opened(self, event: ConversationOpened) -> None:
        self.show_conversation(event.conversation_id)

    def refresh(self, *_: object) -> None:
        """Redraw from the core (after a turn: an edit may have changed the branch); a
        conversation deleted since the event was sent shows none (the next event shows
        another)."""
        cid = self.conversation_id
        self._draw(self.stored.facts(cid) if cid is not None else ())

    def _heard(self, change: ConversationChange) -> None:
        """Any thread: the facts' changes go on to the GUI thread."""
        if isinstance(change, FactsChanged):
            self.facts_changed.emit(change)

    def _on_changed(self, event: FactsChanged) -> None:
        if event.conversation_id == self.conversation_id:
            self._draw(event.facts)

    def _draw(self, facts: tuple[Fact, ...]) -> None:
        current = self.list.currentRow()
        with QSignalBlocker(self.list):
            self.list.clear()
            for fact in facts:
                item = QListWidgetItem(fact.text)
                item.setData(Qt.ItemDataRole.UserRole, fact.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                item.setToolTip(YOURS if fact.edited or fact.message_id is None else TAKEN)
                self.list.addItem(item)
            self.list.setCurrentRow(min(current, len(facts) - 1))
        self.setTitle(f"Facts kept ({len(facts)})" if facts else "Facts kept")
        has_conversation = self.conversation_id is not None
        for widget in (self.entry, self.add_button):
            widget.setEnabled(has_conversation)
        self._selection_changed(self.list.currentRow())

    def _selection_changed(self, row: int) -> None:
        self.delete_button.setEnabled(row >= 0)

    # -- the user's intents ------------------------------------------------------------
    def add_entry(self) -> None:
        """Add the typed fact; a refused one stays typed, with the reason."""
        if self.conversation_id is None:
            return
        if self._ask(lambda: self.stored.add_fact(self.conversation_id or 0, self.entry.text())):
            self.entry.clear()

    def delete_selected(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self._ask(lambda: self.stored.delete_fact(item.data(Qt.ItemDataRole.UserRole)))

    def _reworded(self, item: QListWidgetItem) -> None:
        fact_id, text = item.data(Qt.ItemDataRole.UserRole), item.text()
        fact = self.stored.fact(fact_id)
        if fact is not None and " ".join(text.split()) == fact.text:
            return  # unchanged: it stays as it was (not made the user's)
        if not self._ask(lambda: self.stored.edit_fact(fact_id, text)):
            if not text.strip():
                self.note.setText("A fact needs some text; Delete removes one.")
            self.refresh()  # the core's wording stays (the reason is shown)

    def _ask(self, intent: Callable[[], FactsChanged | EditRefused]) -> bool:
        """Send an intent; the core's refusal is shown in the note."""
        answer = intent()
        if isinstance(answer, EditRefused):
            self.note.setText(answer.message)
            self.note.setStyleSheet("color: #c00;")
            return False
        self.note.setText(HINT)
        self.note.setStyleSheet("")
        return True


def facts_panel(window: Any) -> FactsPanel:
    """The panel for a main window: on the application's fact list, following the
    conversation the application opens."""
    events = window.bridge.events
    panel = FactsPanel(window.bridge.app.conversations)
    events.conversation_opened.connect(panel.on_conversation_opened)
    events.turn_finished.connect(panel.refresh)
    events.turn_failed.connect(panel.refresh)
    return panel
