"""The list of conversations: new, rename, delete, search.

It asks for renames and deletions (``rename_requested``, ``delete_requested``) and
follows the application layer's events; it reads the conversations through the
application layer's queries, and never changes them itself.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.conversations.service import Conversations
from vllmchat.core.app.events import (
    ConversationCreated,
    ConversationDeleted,
    ConversationImported,
    ConversationRenamed,
)

UNTITLED = "New chat"


class ConversationList(QWidget):
    """Conversations newest first; a search box filters them by full text."""

    conversation_selected = Signal(int)
    message_selected = Signal(int, int)
    """A search hit: the conversation and the message that matched."""
    new_requested = Signal()
    rename_requested = Signal(int, str)
    """A conversation and the title the user typed."""
    delete_requested = Signal(int)
    """A conversation the user confirmed to delete."""

    def __init__(self, conversations: Conversations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stored = conversations
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.refresh)
        layout.addWidget(self.search)
        self.list = QListWidget()
        self.list.currentItemChanged.connect(self._on_current)
        layout.addWidget(self.list)
        row = QHBoxLayout()
        for label, slot in (
            ("New", self.new_requested.emit),
            ("Rename", self.rename_current),
            ("Delete", self.delete_current),
        ):
            button = QPushButton(label)
            button.clicked.connect(slot)
            row.addWidget(button)
        layout.addLayout(row)
        self._quiet = False

    def refresh(self) -> None:
        current = self.current_id()
        self._quiet = True
        self.list.clear()
        text = self.search.text().strip()
        if text:
            seen: set[int] = set()
            rows: list[tuple[int, str, int | None]] = []
            for hit in self.stored.search(text):
                conv = hit.conversation
                if conv.id not in seen:
                    seen.add(conv.id)
                    label = f"{conv.title or UNTITLED}\n  {hit.snippet}"
                    rows.append((conv.id, label, hit.message.id))
        else:
            rows = [(c.id, c.title or UNTITLED, None) for c in self.stored.list()]
        for cid, label, message_id in rows:
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, cid)
            item.setData(Qt.ItemDataRole.UserRole + 1, message_id)
            self.list.addItem(item)
            if cid == current:
                self.list.setCurrentItem(item)
        self._quiet = False

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item else None

    def select(self, conversation_id: int | None) -> None:
        """Mark the open conversation (None: a new chat, not stored yet, so none is)."""
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == conversation_id:
                self.list.setCurrentRow(i)
                return
        if conversation_id is None:
            self._quiet = True
            self.list.setCurrentRow(-1)
            self._quiet = False

    def _title(self, conversation_id: int) -> str:
        conversation = self.stored.conversation(conversation_id)
        return conversation.title if conversation is not None else ""

    def _on_current(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is not None and not self._quiet:
            message_id = item.data(Qt.ItemDataRole.UserRole + 1)
            if message_id is not None:
                self.message_selected.emit(item.data(Qt.ItemDataRole.UserRole), message_id)
            else:
                self.conversation_selected.emit(item.data(Qt.ItemDataRole.UserRole))

    def rename_current(self) -> None:
        cid = self.current_id()
        if cid is None:
            return
        title, ok = QInputDialog.getText(
            self, "Rename conversation", "Title:", text=self._title(cid)
        )
        if ok and title.strip():
            self.rename_requested.emit(cid, title)

    def delete_current(self) -> None:
        cid = self.current_id()
        if cid is None:
            return
        answer = QMessageBox.question(
            self, "Delete conversation", f"Delete “{self._title(cid) or UNTITLED}”?"
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_requested.emit(cid)

    def follow(
        self, event: ConversationCreated | ConversationRenamed | ConversationImported
    ) -> None:
        """A conversation was added or renamed: listed anew, the selection kept."""
        self.refresh()

    def follow_deletion(self, event: ConversationDeleted) -> None:
        """A conversation is gone: the newest left is opened, or a new one asked for."""
        was_current = self.current_id() == event.conversation_id
        self.refresh()
        if not was_current:
            return
        if self.list.count():
            self.list.setCurrentRow(0)
        else:
            self.new_requested.emit()
