"""MCP tools in the window: the servers of ``mcp.json`` offered in every turn, each
call asked about in the chat, and each call shown folded in its reply.

The application layer's tools service owns the servers, the approvals and the calls;
the window hands it the config (on the engine's thread, between turns), listens to
its events (handed to the GUI thread by a signal) and answers a call through its
``answer`` intent. Tools always allowed are kept in ``mcp-approved.json`` next to
``mcp.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.events import EditRefused, ToolPickChanged
from vllmchat.core.app.tools.turns import ToolChoice
from vllmchat.core.tools.config import config_path
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolsConfigProblem,
    ToolServiceEvent,
    ToolsUnavailable,
)
from vllmchat.ui.chat.approval_prompt import ApprovalPrompt
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.tool_call_fold import fold_into
from vllmchat.ui.dialogs.tool_lists import ApprovedList, ToolPickList
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

log = logging.getLogger(__name__)
Notify = Callable[[str, int], None]


class ToolActions(QObject):
    """The window's tools (a QObject of the GUI thread: the service's events reach it
    there through ``tool_event``)."""

    tool_event = Signal(object)
    """A tools service event (``core/tools/events.py``), on its way to the GUI thread."""

    def __init__(
        self,
        bridge: EngineBridge,
        parent: QWidget,
        chat: ChatView,
        prompt: ApprovalPrompt,
        notify: Notify,
        store: object = None,
        config_file: Path | None = None,
        conversation: Callable[[], int | None] = lambda: None,
    ) -> None:
        """``store``: not read (the stored calls come from the application layer)."""
        super().__init__(parent)
        self.conversation = conversation  # the conversation shown
        self.bridge, self.window, self.chat, self.prompt = bridge, parent, chat, prompt
        self.service = bridge.app.tools
        self.notify = notify
        self.config_file = config_file or config_path()
        self.tool_choice: ToolChoice = "auto"  # "required": each turn's first step is a call
        self.asked: ApprovalNeeded | None = None
        self.approved: ApprovedList | None = None  # the Tools dialog's, while open
        self.pick: ToolPickList | None = None  # this conversation's tools, while shown

    def wire(self) -> None:
        self.tool_event.connect(self._on_tool_event)
        self.service.subscribe(self._relay)
        self.bridge.events.tools.pick_changed.connect(self._pick_changed)
        self.bridge.events.edit_refused.connect(self._pick_refused)
        self.bridge.events.turn_finished.connect(self.withdraw)
        self.bridge.events.turn_failed.connect(self.withdraw)
        self.prompt.answered.connect(self._answered)

    def _relay(self, event: ToolServiceEvent) -> None:
        """On the thread the event happened on: to the GUI thread, by the signal."""
        self.tool_event.emit(event)

    def _on_tool_event(self, event: ToolServiceEvent) -> None:
        if isinstance(event, ApprovalNeeded):
            self.ask(event)
        elif isinstance(event, ToolCallFinished):
            self.show_call(event)
        elif isinstance(event, ServerStatus):
            self.show_status(event)
            self.show_pick()
        elif isinstance(event, ToolsUnavailable):
            self.show_unavailable(event)
        elif isinstance(event, ToolsConfigProblem):
            self.notify(f"MCP servers not used: {event.message}", 30_000)

    # -- the servers -------------------------------------------------------------------
    def start(self) -> None:
        """Offer the configured servers' tools from the next turn on (none: no tools); a
        config that cannot be used is said at once, and the last one stays in use."""
        problem = self.service.check(self.config_file)
        if problem is not None:
            self.notify(f"MCP servers not used: {problem.message}", 30_000)
            return
        self.bridge.call(self.bridge.app.use_tools, self.config_file, tool_choice=self.tool_choice)

    def open_servers(self) -> None:
        """The Tools dialog: ``mcp.json`` edited and tried; used from the next turn."""
        from vllmchat.ui.dialogs.tools_tab import ToolsTab

        dialog = QDialog(self.window)
        dialog.setWindowTitle("MCP servers")
        dialog.resize(720, 560)
        layout = QVBoxLayout(dialog)
        self.tab = ToolsTab(self.config_file, dialog)
        layout.addWidget(self.tab, 3)
        self.approved = ApprovedList(dialog)
        self.approved.set_names(self.service.policy.always)
        self.approved.revoke_requested.connect(self.revoke)
        layout.addWidget(self.approved, 1)
        self.require_call = QCheckBox("Begin each turn with a tool call")
        self.require_call.setToolTip(
            "The reply's first step is held to a call of an offered tool (for a model that "
            "does not call tools by itself); from the next turn, in every conversation."
        )
        self.require_call.setChecked(self.tool_choice == "required")
        self.require_call.toggled.connect(self.require_a_call)
        layout.addWidget(self.require_call)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.reject)
        layout.addWidget(buttons)
        dialog.finished.connect(self.start)
        dialog.open()
        self.dialog = dialog

    def require_a_call(self, required: bool) -> None:
        """Each turn's first step a call (``tool_choice="required"``) or the model's pick;
        used from the next turn, when the dialog closes."""
        self.tool_choice = "required" if required else "auto"

    def revoke(self, name: str) -> None:
        """A tool always allowed asks before each call again (``mcp-approved.json``)."""
        revoked = self.service.revoke(name)
        self.notify(
            f"Revoked for this session only: {revoked.failed}"
            if revoked.failed
            else f"{name}: each call asks again.",
            10_000,
        )
        if self.approved is not None:
            self.approved.set_names(self.service.policy.always)

    # -- the tools this conversation offers --------------------------------------------
    def open_pick(self) -> None:
        """The checkbox list of this conversation's tools (its servers started to list them)."""
        dialog = QDialog(self.window)
        dialog.setWindowTitle("Tools in this conversation")
        dialog.resize(420, 480)
        layout = QVBoxLayout(dialog)
        self.pick = ToolPickList(dialog)
        layout.addWidget(self.pick)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.reject)
        layout.addWidget(buttons)
        self.pick.switched.connect(self.switch)
        self.service.start_in_background()  # each state comes back as an event
        self.show_pick()
        dialog.open()
        self.pick_dialog = dialog

    def show_pick(self) -> None:
        conversation, pick = self.conversation(), self.pick  # None: the new chat
        if pick is None:
            return
        off = self.bridge.app.tool_picks.pick(conversation).off
        pick.show_tools(self.service.servers(), self.service.tools(), off)

    def switch(self, names: list[str], on: bool) -> None:
        """The user's change: an intent to the application layer, announced as its event."""
        conversation = self.conversation()  # None: the new chat, from its first turn
        self.bridge.events.publish(self.bridge.app.tool_picks.switch(conversation, names, on))

    def _pick_changed(self, event: ToolPickChanged) -> None:
        self.notify(event.message, 8_000)
        self.show_pick()

    def _pick_refused(self, event: EditRefused) -> None:
        if event.action == "tools":  # the message is the status bar's: the boxes put back
            self.show_pick()

    def close(self) -> None:
        """After the engine's thread has ended: the servers stopped."""
        self.service.unsubscribe(self._relay)
        self.service.close(timeout_s=5.0)

    # -- a turn's tool steps -------------------------------------------------------------
    def ask(self, event: ApprovalNeeded) -> None:
        """A call waits: the model's call text gives way to the prompt."""
        self.asked = event
        if self.chat.streaming is not None:
            self.chat.streaming.set_markdown("")
        self.prompt.ask(event)

    def _answered(self, event: ApprovalNeeded, approval: Approval) -> None:
        """The user's answer: an intent to the tools service, which resumes the turn."""
        failed = self.service.answer(event, approval)
        if failed:
            self.notify(f"Allowed for this session only: {failed}", 15_000)
        self.asked = None

    def show_call(self, event: ToolCallFinished) -> None:
        """The call folded into the reply being streamed, above its text."""
        message = self.chat.streaming
        if message is None:
            return
        message.set_markdown("")  # the call as the model wrote it: shown folded instead
        fold_into(message, event.result, message.body)

    def show_unavailable(self, event: ToolsUnavailable) -> None:
        """A turn without the tools it was meant to have: said in its reply (and the
        status bar), once per cause."""
        self.notify(event.message, 30_000)
        message = self.chat.streaming
        if message is None:
            return
        note = QLabel(event.message, message)
        note.setObjectName("tools-unavailable")
        note.setWordWrap(True)
        note.setAccessibleName("Tools not available")
        layout = message.layout()
        if isinstance(layout, QVBoxLayout):
            layout.insertWidget(layout.indexOf(message.body), note)

    def show_stored(self) -> None:
        """The stored calls of the replies shown (a conversation opened), folded."""
        widgets = {w.message_id: w for w in self.chat.messages() if w.role == "assistant"}
        ids = [i for i in widgets if i is not None]
        for message_id, results in self.bridge.app.conversations.tool_steps(ids).items():
            widget = widgets[message_id]
            for result in results:
                fold_into(widget, result, widget.body)

    def show_status(self, status: ServerStatus) -> None:
        if status.state == "failed":
            self.notify(f"MCP server {status.server} failed: {status.message}", 30_000)
        elif status.state == "ready":
            self.notify(f"MCP server {status.server} ready ({len(status.tools)} tools).", 5_000)

    def withdraw(self, _event: object) -> None:
        """The turn ended: a prompt still shown is no longer waited for."""
        self.asked = None
        self.prompt.withdraw()
