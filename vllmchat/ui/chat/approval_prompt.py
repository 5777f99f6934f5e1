"""The prompt a tool call waits at: its tool, its arguments, and the user's answer.

Allow once, for this conversation, or always for this tool; or deny, with a reason
the model is shown. The answer is emitted with its event; the window hands it to the
application layer's tools service, whose turn (on the engine's thread) waits for it.
"""

from __future__ import annotations

import json

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.tools.events import Approval, ApprovalNeeded, Decision


class ApprovalPrompt(QFrame):
    """Shown in the chat while a call waits; emits ``answered`` with the call's event."""

    answered = Signal(object, object)
    """``(ApprovalNeeded, Approval)``: the user's answer to the call shown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName("Tool call waiting for approval")
        self._event: ApprovalNeeded | None = None
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.arguments = QPlainTextEdit()
        self.arguments.setReadOnly(True)
        self.arguments.setAccessibleName("The call's arguments")
        self.arguments.setMaximumHeight(160)
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("reason for a denial (the model sees it); optional")
        self.once = QPushButton("Allow once")
        self.conversation = QPushButton("Allow in this conversation")
        self.always = QPushButton("Always allow this tool")
        self.deny = QPushButton("Deny")
        buttons = QHBoxLayout()
        for button in (self.once, self.conversation, self.always):
            buttons.addWidget(button)
        buttons.addStretch()
        buttons.addWidget(self.deny)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addWidget(self.reason)
        layout.addLayout(buttons)
        self.once.clicked.connect(lambda: self._answer("once"))
        self.conversation.clicked.connect(lambda: self._answer("conversation"))
        self.always.clicked.connect(lambda: self._answer("always"))
        self.deny.clicked.connect(lambda: self._answer("deny"))
        self.reason.returnPressed.connect(lambda: self._answer("deny"))
        self.hide()

    def ask(self, event: ApprovalNeeded) -> None:
        """Show ``event``'s call and wait for a button."""
        self._event = event
        description = f" — {event.tool.description.strip()}" if event.tool.description else ""
        self.title.setText(
            f"The model wants to call <b>{event.tool.name}</b> on the server "
            f"<b>{event.tool.server}</b>{description}"
        )
        self.arguments.setPlainText(
            json.dumps(dict(event.call.arguments), ensure_ascii=False, indent=2)
        )
        self.reason.clear()
        self.show()
        self.once.setFocus()

    def _answer(self, decision: Decision) -> None:
        event, self._event = self._event, None
        if event is None:
            return
        reason = self.reason.text().strip() if decision == "deny" else ""
        self.hide()
        self.answered.emit(event, Approval(decision, reason))

    def withdraw(self) -> None:
        """The turn ended while waiting (stopped): hide without answering."""
        self._event = None
        self.hide()
