"""The window's conversation actions: export, import, a summary edited by hand, pins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.transfer import export_file, import_file
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.conversation_list import ConversationList

Status = Callable[[str, int], None]  # (message, milliseconds): the status bar


class ConversationActions:
    """Given the store, the views they change, the open conversation (``open_id``), the
    status bar, and how to rebuild the view (``rendered``)."""

    def __init__(
        self,
        store: ConversationStore,
        parent: QWidget,
        views: tuple[ChatView, ConversationList],
        open_id: Callable[[], int | None],
        status: Status,
        rendered: Callable[[], None],
    ) -> None:
        self.store, self.parent = store, parent
        self.chat, self.conversations = views
        self.open_id, self.status, self.rendered = open_id, status, rendered

    def edit_summary(self, summary_id: int) -> None:
        text, ok = QInputDialog.getMultiLineText(
            self.parent, "Edit summary", "Summary:", self.store.summary(summary_id).content
        )
        if ok and text.strip():
            self.store.edit_summary(summary_id, text.strip())
            self.rendered()

    def pin_message(self, message_id: int, pinned: bool) -> None:
        """Pin or unpin a message (it stays word for word in every prompt)."""
        try:
            self.store.set_pinned(message_id, pinned)
        except StoreError as exc:
            self.status(str(exc), 8000)
            return
        for widget in self.chat.messages():
            if widget.message_id == message_id:
                widget.set_pinned(pinned)
        text = "stays word for word in every prompt" if pinned else "is summarized like others"
        self.status(f"Message {'pinned' if pinned else 'unpinned'}: it {text}.", 8000)

    def export_conversation(self) -> None:
        conversation_id = self.open_id()
        if conversation_id is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self.parent, "Export", str(Path.home() / "chat.md"), "Markdown (*.md);;JSON (*.json)"
        )
        if path:
            export_file(self.store, conversation_id, path)

    def import_conversation(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.parent, "Import", str(Path.home()), "JSON (*.json)"
        )
        if not path:
            return
        try:
            conv = import_file(self.store, path)
        except StoreError as exc:
            QMessageBox.warning(self.parent, "Import", str(exc))
            return
        self.conversations.refresh()
        self.conversations.select(conv.id)
