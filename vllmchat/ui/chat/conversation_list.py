"""The list of conversations: new, rename, delete, search."""

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

from vllmchat.core.conversations.store.store import ConversationStore


class ConversationList(QWidget):
    """Conversations newest first; a search box filters them by full text."""

    conversation_selected = Signal(int)
    message_selected = Signal(int, int)
    """A search hit: the conversation and the message that matched."""
    new_requested = Signal()

    def __init__(self, store: ConversationStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
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
            for conv, msg, snippet in self.store.search(text):
                if conv.id not in seen:
                    seen.add(conv.id)
                    rows.append((conv.id, f"{conv.title or 'New chat'}\n  {snippet}", msg.id))
        else:
            rows = [(c.id, c.title or "New chat", None) for c in self.store.conversations()]
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

    def select(self, conversation_id: int) -> None:
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == conversation_id:
                self.list.setCurrentRow(i)
                return

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
            self, "Rename conversation", "Title:", text=self.store.conversation(cid).title
        )
        if ok and title.strip():
            self.store.rename(cid, title)
            self.refresh()

    def delete_current(self) -> None:
        cid = self.current_id()
        if cid is None:
            return
        answer = QMessageBox.question(
            self, "Delete conversation", f"Delete “{self.store.conversation(cid).title}”?"
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.store.delete(cid)
            self.refresh()
            if self.list.count():
                self.list.setCurrentRow(0)
            else:
                self.new_requested.emit()
