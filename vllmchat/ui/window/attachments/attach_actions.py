"""The window's attachments: the paper-clip button, a drop or a paste send the file to the
application layer; a file waiting for the next message shows as a chip by the input
(right-click takes it back), a sent one as a chip in its message that opens its text
(an image's chip shows its thumbnail and opens the picture), and a reply answered from
passages has a chip that opens them."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox, QWidget

from vllmchat.core.app.conversations.service import Attachment, ChunkHit, Conversations
from vllmchat.core.app.events import AttachmentAdded, AttachmentRejected, AttachmentRemoved
from vllmchat.core.conversations.events import PassagesUsed
from vllmchat.ui.chat.attachments import ImageViewer, TextViewer
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.message_widget import MessageWidget
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

Say = Callable[[str], None]  # a line in the status bar


def detail(att: Attachment) -> str:
    """How the chip describes an attachment."""
    if att.kind == "image":
        width, height = att.meta.get("width"), att.meta.get("height")
        size = f"{width}×{height} · " if width and height else ""
        return f"{size}{att.tokens:,} tokens"
    size = f"{att.pages} pages" if att.pages else f"{att.tokens:,} tokens"
    return size + (" · by passages" if att.mode == "retrieval" else "")


def offer_vision_model(parent: QWidget, message: str, pick: Callable[[], None]) -> QMessageBox:
    """A box that says why the image was refused and offers the picker, filtered to the
    models that take images (not modal: the chat goes on meanwhile)."""
    box = QMessageBox(
        QMessageBox.Icon.Information,
        "This model cannot see images",
        message,
        QMessageBox.StandardButton.Cancel,
        parent,
    )
    choose = box.addButton("Choose a model that sees images…", QMessageBox.ButtonRole.AcceptRole)
    choose.clicked.connect(pick)
    box.setModal(False)
    box.show()
    return box


class AttachActions(QObject):
    """Attach, take back, show and open attachments (a QObject of the GUI thread)."""

    def __init__(
        self,
        bridge: EngineBridge,
        conversations: Conversations,
        chat: ChatView,
        chat_input: ChatInput,
        parent: QWidget,
        say: Say,
    ) -> None:
        super().__init__(parent)
        self.bridge, self.chat, self.input, self.say = bridge, chat, chat_input, say
        self.stored = conversations  # read only: attaching and taking back are intents
        self.viewers: list[TextViewer | ImageViewer] = []
        # Opens the model picker showing only models that take images (set by the window).
        self.pick_vision_model: Callable[[], None] | None = None
        self.vision_offer: QMessageBox | None = None  # shown after an image was refused
        e = bridge.events
        e.attachment_added.connect(self._added)
        e.attachment_rejected.connect(self._rejected)
        e.attachment_removed.connect(self._removed)
        e.passages_used.connect(self._passages)
        chat_input.attach_requested.connect(bridge.attach)
        chat_input.pending.removed.connect(bridge.detach)
        chat_input.pending.opened.connect(self.open_attachment)
        chat.decorate = self.decorate

    def show_pending(self, conversation_id: int | None) -> None:
        """The chips of the files waiting for this conversation's next message."""
        self.input.pending.clear()
        for att in self.stored.pending_attachments(conversation_id) if conversation_id else ():
            self.input.pending.add(att.id, att.name, detail(att), removable=True, image=att.data)

    def decorate(self, widget: MessageWidget) -> None:
        """A stored message's chips: its attachments, or the passages it was given."""
        if widget.message_id is None or widget.role not in ("user", "assistant"):
            return
        if widget.chips is not None:
            widget.chips.clear()
        if widget.role == "user":
            atts = self.stored.attachments_of([widget.message_id]).get(widget.message_id, ())
            for att in atts:
                widget.chip_row().add(att.id, att.name, detail(att), image=att.data)
            if atts:
                widget.chip_row().opened.connect(self.open_attachment)
                self.input.pending.clear()
        else:
            used = list(self.stored.passages_used(widget.message_id))
            if used:
                self._passages_chip(widget, widget.message_id, used)

    def _passages_chip(self, widget: MessageWidget, reply_id: int, used: list[ChunkHit]) -> None:
        row = widget.chip_row()
        row.add(reply_id, f"{len(used)} passages", "; ".join(h.label for h in used[:3]))
        row.opened.connect(self.open_passages)

    def open_attachment(self, attachment_id: int) -> None:
        att = self.stored.attachment(attachment_id)
        if att is None:
            return  # gone with its conversation meanwhile
        if att.kind == "image" and att.data is not None:
            image = ImageViewer(f"{att.name} ({detail(att)})", att.data, self.input.window())
            self.viewers = [v for v in self.viewers if v.isVisible()] + [image]
            image.show()
            return
        self._view(f"{att.name} ({detail(att)})", att.text)

    def open_passages(self, reply_id: int) -> None:
        used = self.stored.passages_used(reply_id)
        text = "\n\n".join(f"[{n}] {h.name}, {h.label}:\n{h.text}" for n, h in enumerate(used, 1))
        self._view("The passages this reply was given", text)

    def _view(self, title: str, text: str) -> None:
        viewer = TextViewer(title, text, self.input.window())
        self.viewers = [v for v in self.viewers if v.isVisible()] + [viewer]
        viewer.show()

    def _added(self, event: AttachmentAdded) -> None:
        att = self.stored.attachment(event.attachment_id)
        if att is None:
            return
        self.input.pending.add(att.id, att.name, detail(att), removable=True, image=att.data)
        self.say(event.message)

    def _rejected(self, event: AttachmentRejected) -> None:
        self.say(event.message)
        if event.reason == "image_needs_vision" and self.pick_vision_model is not None:
            self.vision_offer = offer_vision_model(
                self.input.window(), event.message, self.pick_vision_model
            )

    def _removed(self, event: AttachmentRemoved) -> None:
        self.input.pending.remove(event.attachment_id)

    def _passages(self, event: PassagesUsed) -> None:
        for widget in self.chat.messages():
            if widget.message_id == event.message_id:
                self._passages_chip(widget, event.message_id, list(event.passages))
