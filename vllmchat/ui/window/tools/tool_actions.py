"""MCP tools in the window: the servers of ``mcp.json`` offered in every turn, each
call asked about in the chat, and each call shown folded in its reply.

The manager is made at start-up (its servers start at the first turn, on its own
thread) and handed to the application layer on the engine's thread; a changed
config replaces it there, between turns, and the old one is closed there too. Tools
always allowed are kept in ``mcp-approved.json`` next to ``mcp.json``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QVBoxLayout, QWidget

from vllmchat.core.app.tool_turns import ToolChoice
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.tools.approval import ApprovalPolicy
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
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

log = logging.getLogger(__name__)
Notify = Callable[[str, int], None]


def approved_path(config_file: Path) -> Path:
    return config_file.with_name("mcp-approved.json")


def load_approved(config_file: Path) -> list[str]:
    """The tools the user always allows (none where the file is missing or unreadable)."""
    try:
        names = json.loads(approved_path(config_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


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
    ) -> None:
        super().__init__(parent)
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

    def wire(self) -> None:
        tools = self.bridge.events.tools
        tools.approval_needed.connect(self.ask)
        tools.call_finished.connect(self.show_call)
        tools.server_status.connect(self.show_status)
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
        layout.addWidget(self.tab)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.reject)
        layout.addWidget(buttons)
        dialog.finished.connect(self.start)
        dialog.open()
        self.dialog = dialog

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
            names = sorted(self.policy.always | {self.asked.call.name})
            try:
                approved_path(self.config_file).write_text(json.dumps(names), encoding="utf-8")
            except OSError as exc:
                self.notify(f"Allowed for this session only: {exc}", 15_000)
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
