"""The window's conversation actions: export, import, a summary edited by hand, pins.

They ask the application layer (through the bridge) and follow its events: the
view changes once the store has the change, and a refusal is told.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from vllmchat.core.app.conversations.service import Conversations
from vllmchat.core.app.errors import StoreError
from vllmchat.core.app.events import (
    ConversationImported,
    EditRefused,
    MessagePinned,
    SummaryEdited,
)
from vllmchat.core.app.exporting import export_conversation
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.conversation_list import ConversationList
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

Status = Callable[[str, int], None]  # (message, milliseconds): the status bar


class ConversationActions:
    """Given the bridge (intents, events), the conversations (to read), the views they change,
    the open conversation (``open_id``), the status bar, and how to rebuild the view
    (``rendered``)."""

    def __init__(
        self,
        bridge: EngineBridge,
        conversations: Conversations,
        parent: QWidget,
        views: tuple[ChatView, ConversationList],
        open_id: Callable[[], int | None],
        status: Status,
        rendered: Callable[[], None],
    ) -> None:
        self.bridge, self.stored, self.parent = bridge, conversations, parent
        self.chat, self.conversations = views
        self.open_id, self.status, self.rendered = open_id, status, rendered

    def wire(self) -> None:
        """Follow the application layer's events for the changes asked for here."""
        e = self.bridge.events
        e.message_pinned.connect(self.pinned)
        e.summary_edited.connect(self.summary_edited)
        e.conversation_imported.connect(self.imported)
        e.edit_refused.connect(self.refused)

    def edit_summary(self, summary_id: int) -> None:
        summary = self.stored.summary(summary_id)
        if summary is None:
            return  # gone with its conversation meanwhile
        text, ok = QInputDialog.getMultiLineText(
            self.parent, "Edit summary", "Summary:", summary.content
        )
        if ok and text.strip():
            self.bridge.edit_summary(summary_id, text)

    def summary_edited(self, event: SummaryEdited) -> None:
        if event.conversation_id == self.open_id():
            self.rendered()

    def pin_message(self, message_id: int, pinned: bool) -> None:
        """Pin or unpin a message (it stays word for word in every prompt)."""
        self.bridge.pin_message(message_id, pinned)

    def pinned(self, event: MessagePinned) -> None:
        for widget in self.chat.messages():
            if widget.message_id == event.message_id:
                widget.set_pinned(event.pinned)
        pinned = event.pinned
        text = "stays word for word in every prompt" if pinned else "is summarized like others"
        self.status(f"Message {'pinned' if pinned else 'unpinned'}: it {text}.", 8000)

    def export_conversation(self) -> None:
        conversation_id = self.open_id()
        if conversation_id is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self.parent, "Export", str(Path.home() / "chat.md"), "Markdown (*.md);;JSON (*.json)"
        )
        if not path:
            return
        try:
            written = export_conversation(self.bridge.app, conversation_id, path)
        except (StoreError, OSError) as exc:
            QMessageBox.warning(self.parent, "Export", f"The conversation was not exported: {exc}")
            return
        self.status(f"Exported to {written}.", 8000)

    def import_conversation(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.parent, "Import", str(Path.home()), "JSON (*.json)"
        )
        if path:
            self.bridge.import_conversation(path)

    def imported(self, event: ConversationImported) -> None:
        self.conversations.refresh()
        self.conversations.select(event.conversation_id)

    def refused(self, event: EditRefused) -> None:
        """A change not made: a file that could not be imported is a dialog, the rest
        a line in the status bar (a pin not made: the view drawn again from the store)."""
        if event.action == "import":
            QMessageBox.warning(self.parent, "Import", event.message)
            return
        self.status(event.message, 8000)
        if event.action == "pin":
            self.rendered()
