"""MCP tools in the window: the servers of ``mcp.json`` offered in every turn, each
call asked about in the chat, and each call shown folded in its reply.

The manager is made at start-up (its servers start at the first turn, on its own
thread) and handed to the application layer on the engine's thread; a changed
config replaces it there, between turns, and the old one is closed there too. Tools
always allowed are kept in ``mcp-approved.json`` next to ``mcp.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QVBoxLayout, QWidget

from vllmchat.core.app.events import EditRefused, ToolPickChanged
from vllmchat.core.app.tool_turns import ToolChoice
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.tools.approval import ApprovalPolicy
from vllmchat.core.tools.approved import load_approved, save_approved
from vllmchat.core.tools.config import ConfigError, ToolsConfig, config_path, load_config
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolEvent,
    ToolResult,
)
from vllmchat.core.tools.manager import ToolServerManager
from vllmchat.ui.chat.approval_prompt import ApprovalPrompt
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.tool_call_fold import fold_into
from vllmchat.ui.dialogs.tool_lists import ApprovedList, ToolPickList
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

log = logging.getLogger(__name__)
Notify = Callable[[str, int], None]


class ToolActions(QObject):
    """The window's tools (a QObject of the GUI thread: tool signals reach it there)."""

    def __init__(
        self,
        bridge: EngineBridge,
        parent: QWidget,
        chat: ChatView,
        prompt: ApprovalPrompt,
        notify: Notify,
        store: ConversationStore,
        config_file: Path | None = None,
        conversation: Callable[[], int | None] = lambda: None,
    ) -> None:
        super().__init__(parent)
        self.conversation = conversation  # the conversation shown
        self.bridge, self.window, self.chat, self.prompt = bridge, parent, chat, prompt
        self.store = store
        self.notify = notify
        self.config_file = config_file or config_path()
        self.policy = ApprovalPolicy(load_approved(self.config_file))
        self.tool_choice: ToolChoice = "auto"  # "required": each turn's first step is a call
        self.config: ToolsConfig | None = None  # as offered to the model
        self.manager: ToolServerManager | None = None  # swapped on the engine's thread
        self.asked: ApprovalNeeded | None = None
        self.results: list[ToolResult] = []  # this window's calls, in order (tests)
        self.approved: ApprovedList | None = None  # the Tools dialog's, while open
        self.pick: ToolPickList | None = None  # this conversation's tools, while shown

    def wire(self) -> None:
        tools = self.bridge.events.tools
        tools.approval_needed.connect(self.ask)
        tools.call_finished.connect(self.show_call)
        tools.server_status.connect(self.show_status)
        tools.pick_changed.connect(self._pick_changed)
        self.bridge.events.edit_refused.connect(self._pick_refused)
        self.bridge.events.turn_finished.connect(self.withdraw)
        self.bridge.events.turn_failed.connect(self.withdraw)
        self.prompt.answered.connect(self._answered)

    # -- the servers -------------------------------------------------------------------
    def start(self) -> None:
        """Offer the configured servers' tools from the next turn on (none: no tools)."""
        try:
            config = load_config(self.config_file)
        except ConfigError as exc:
            self.notify(f"MCP servers not used: {exc}", 30_000)
            return
        if config == self.config:
            return
        self.config = config
        manager = None
        if any(not s.disabled for s in config.servers):
            manager = ToolServerManager(config, on_event=self._announce)
        if self.bridge.call(self._swap, manager) is None and manager is not None:
            manager.close()  # the window is closing

    def _announce(self, event: ToolEvent) -> None:
        """A server's state, on the manager's thread: signalled to the GUI thread."""
        self.bridge.events.tools.publish(event)

    def _swap(self, manager: ToolServerManager | None) -> None:
        """On the engine's thread, between turns: the new manager in, the old one closed."""
        old, self.manager = self.manager, manager
        self.bridge.app.use_tools(manager, self.policy, tool_choice=self.tool_choice)
        if old is not None:
            old.close()

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
        self.approved.set_names(self.policy.always)
        self.approved.revoke_requested.connect(self.revoke)
        layout.addWidget(self.approved, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.reject)
        layout.addWidget(buttons)
        dialog.finished.connect(self.start)
        dialog.open()
        self.dialog = dialog

    def revoke(self, name: str) -> None:
        """A tool always allowed asks before each call again (``mcp-approved.json``)."""
        self.policy.revoke(name)
        failed = save_approved(self.config_file, self.policy.always)
        self.notify(
            f"Revoked for this session only: {failed}"
            if failed
            else f"{name}: each call asks again.",
            10_000,
        )
        if self.approved is not None:
            self.approved.set_names(self.policy.always)

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
        self.bridge.events.tools.server_status.connect(lambda _s: self.show_pick())
        if self.manager is not None:
            for status in self.manager.statuses():
                if status.state == "stopped":
                    self.manager.start(status.server)  # each one's state is announced
        self.show_pick()
        dialog.open()
        self.pick_dialog = dialog

    def show_pick(self) -> None:
        conversation, pick = self.conversation(), self.pick
        if pick is None or conversation is None:
            return
        manager = self.manager
        servers = [s.name for s in manager.config.servers if not s.disabled] if manager else []
        tools = manager.tools() if manager else []
        pick.show_tools(servers, tools, self.bridge.app.tool_picks.pick(conversation).off)

    def switch(self, names: list[str], on: bool) -> None:
        """The user's change: an intent to the application layer, announced as its event."""
        conversation = self.conversation()
        if conversation is not None:
            self.bridge.events.publish(self.bridge.app.tool_picks.switch(conversation, names, on))

    def _pick_changed(self, event: ToolPickChanged) -> None:
        self.notify(event.message, 8_000)
        self.show_pick()

    def _pick_refused(self, event: EditRefused) -> None:
        if event.action == "tools":  # the message is the status bar's: the boxes put back
            self.show_pick()

    def close(self) -> None:
        """After the engine's thread has ended: the servers stopped."""
        if self.manager is not None:
            self.manager.close(timeout_s=5.0)
            self.manager = None

    # -- a turn's tool steps -------------------------------------------------------------
    def ask(self, event: ApprovalNeeded) -> None:
        """A call waits: the model's call text gives way to the prompt."""
        self.asked = event
        if self.chat.streaming is not None:
            self.chat.streaming.set_markdown("")
        self.prompt.ask(event)

    def _answered(self, approval: Approval) -> None:
        if approval.decision == "always" and self.asked is not None:
            failed = save_approved(self.config_file, self.policy.always | {self.asked.call.name})
            if failed:
                self.notify(f"Allowed for this session only: {failed}", 15_000)
        self.asked = None

    def show_call(self, event: ToolCallFinished) -> None:
        """The call folded into the reply being streamed, above its text."""
        self.results.append(event.result)
        message = self.chat.streaming
        if message is None:
            return
        message.set_markdown("")  # the call as the model wrote it: shown folded instead
        fold_into(message, event.result, message.body)

    def show_stored(self) -> None:
        """The stored calls of the replies shown (a conversation opened), folded."""
        widgets = {w.message_id: w for w in self.chat.messages() if w.role == "assistant"}
        ids = [i for i in widgets if i is not None]
        for message_id, results in ToolStepList(self.store).of_messages(ids).items():
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
