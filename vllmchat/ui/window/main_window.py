"""The main window: conversations, chat, offload and memory panels, status line.

It renders what the application layer announces and forwards what the user asks
for; its parts are small objects given what they use (``ModelActions``,
``TunerActions``, ``ConversationActions``, ``LoadView``, ``TurnView``,
``MemoryReadout``, ``WindowState``). It reads the conversations through the
application layer's queries (``app.conversations``) and never opens the store; a new
chat is stored by the application layer at its first message.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QMainWindow,
    QMenu,
    QMessageBox,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import ConversationOpened, StorageWarning, TitleMade
from vllmchat.core.app.start import database_of
from vllmchat.core.app_settings import AppSettings, save_app_settings
from vllmchat.core.engine.events import DoneEvent, ErrorEvent
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.paths import log_dir
from vllmchat.ui.chat.approval_prompt import ApprovalPrompt
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.chat.chat_view import ChatView, history_items
from vllmchat.ui.chat.conversation_list import ConversationList
from vllmchat.ui.chat.facts_panel import facts_panel
from vllmchat.ui.chat.markdown_render import warm_up
from vllmchat.ui.common.theme import ThemeWatcher
from vllmchat.ui.common.workers import WorkerGroup
from vllmchat.ui.offload.memory_panel import MemoryPanel
from vllmchat.ui.offload.offload_panel import OffloadPanel
from vllmchat.ui.server.server_dock import ServerDock
from vllmchat.ui.window.attachments.attach_actions import AttachActions
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge
from vllmchat.ui.window.conversations.conversation_actions import ConversationActions
from vllmchat.ui.window.desktop.window_state import WindowState
from vllmchat.ui.window.loads.load_view import LoadView
from vllmchat.ui.window.loads.window_actions import ModelActions, TunerActions
from vllmchat.ui.window.readouts.banner import EngineBanner
from vllmchat.ui.window.readouts.memory_readout import MemoryReadout
from vllmchat.ui.window.readouts.status_bar import fill_status_bar
from vllmchat.ui.window.tools.tool_actions import ToolActions
from vllmchat.ui.window.turns.turn_view import TurnView
from vllmchat.ui.window.voice_wiring import VoiceWiring


class MainWindow(QMainWindow):
    """Everything a chat needs; slow work happens on the engine thread or workers."""

    turn_ended = Signal(object)
    """A turn's end is shown: its ``DoneEvent``, or the ``ErrorEvent`` it failed with."""
    title_shown = Signal(object)
    """A conversation's title came back (``TitleMade``) and the list shows it."""

    def __init__(
        self,
        app: ChatApp | Any,
        settings: AppSettings | None = None,
        kv: Any = None,
        *,
        save_settings: bool = True,
        engine: Engine | None = None,
    ) -> None:
        """``app``: the application layer (``core/app/start.py`` opens it), which owns
        the settings and writes them once a load confirmed them. The older form is taken
        too: the conversations' storage and its KV cache (passed on, never read), the
        ``settings`` for the application layer to own (written back with
        ``save_settings``), and ``engine``, another engine than the local one."""
        super().__init__()
        self.setWindowTitle("vllmchat")
        self.resize(1280, 800)
        self.workers = WorkerGroup(self)
        self._warm_up = warm_up(self)
        if isinstance(app, ChatApp):
            self.bridge = EngineBridge(app, parent=self)
        else:
            persist = save_app_settings if save_settings else None
            self.bridge = EngineBridge(
                app, kv, self, settings=settings, persist=persist, engine=engine
            )
        self.stored = self.bridge.app.conversations  # read here; changed by intents
        self.theme = ThemeWatcher(self)
        self.closing = False
        self.conversation_id: int | None = None  # None: a new chat, stored at its first message
        self._build()
        self.models = ModelActions(
            self.bridge, self, self.offload, self.downloads, self.show_notice
        )
        self.tuning = TunerActions(self.bridge, self, self.offload)
        self.talk = ConversationActions(
            self.bridge,
            self.stored,
            self,
            (self.chat, self.conversations),
            lambda: self.conversation_id,
            self._status,
            self.render_conversation,
        )
        self.readout = MemoryReadout(self.bridge, self.memory)
        self.attached = AttachActions(
            self.bridge,
            self.stored,
            self.chat,
            self.input,
            self,
            lambda text: self.statusBar().showMessage(text, 10_000),
        )
        self.attached.pick_vision_model = lambda: self.models.choose_model(vision_only=True)
        self.tool_actions = ToolActions(
            self.bridge,
            self,
            self.chat,
            self.approval,
            self._status,
            conversation=lambda: self.conversation_id,
        )
        self.window_state = WindowState(self, self.split, database_of(self.bridge.app))
        self.loads = LoadView(
            self.bridge,
            self,
            self.input,
            (self.offload, self.memory),
            self.banner,
            self.status_line,
            self.busy_bar,
        )
        self.turns = TurnView(
            self.bridge,
            self.stored,
            self,
            (self.chat, self.input, self.conversations),
            (self.readout, self.status_line, self.offload, self.memory),
            self.loads,
            self.statusBar(),
            self.ask_for_title,
            self.turn_ended.emit,
        )
        self.server_dock = ServerDock(self.bridge, self)  # the local API, hidden until asked
        self._connect()
        self._menus()
        self.voice = VoiceWiring(self)  # the mic beside Send, spoken replies, the Voice menu
        existing = self.stored.list()
        last = self.window_state.restore()
        if last is not None and any(c.id == last for c in existing):
            self.open_conversation(last)
        elif existing:
            self.open_conversation(existing[0].id)
        else:
            self.new_conversation()
        self.conversations.refresh()
        self.conversations.select(self.conversation_id)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(2000)
        self._memory_timer.timeout.connect(self.readout.update)
        self._memory_timer.start()

    @property
    def settings(self) -> AppSettings:
        """The settings the application layer runs with (its snapshot; read only)."""
        return self.bridge.snapshot.settings

    @property
    def info(self) -> ModelInfo | None:
        """The loaded model, as the last load's event told it."""
        return self.loads.info

    @property
    def desc(self) -> ModelDescription | None:
        return self.loads.desc

    @property
    def last_turn(self) -> DoneEvent | ErrorEvent | None:
        return self.turns.last

    def send(self, text: str) -> None:
        """Send ``text`` as the user's next message (as the input box does)."""
        self.turns.send(text)

    @property
    def last_load(self) -> Any:
        return self.loads.last

    def _status(self, message: str, ms: int) -> None:
        self.statusBar().showMessage(message, ms)

    # -- layout ---------------------------------------------------------------------
    def _build(self) -> None:
        self.conversations = ConversationList(self.stored)
        self.banner = EngineBanner()
        self.chat = ChatView()
        self.input = ChatInput()
        center = QWidget()
        v = QVBoxLayout(center)
        v.addWidget(self.banner)
        v.addWidget(self.chat, 1)
        self.approval = ApprovalPrompt()  # shown while a tool call waits for the user
        v.addWidget(self.approval)
        v.addWidget(self.input)
        self.offload = OffloadPanel()
        self.memory = MemoryPanel()
        side = QWidget()
        s = QVBoxLayout(side)
        self.facts_panel = facts_panel(self)
        for panel in (self.offload, self.memory, self.facts_panel):
            s.addWidget(panel)
        s.addStretch()
        # A short window (the Server panel docked below) scrolls the side column instead
        # of squeezing its wrapped lines over each other.
        side_scroll = QScrollArea()
        side_scroll.setWidget(side)
        side_scroll.setWidgetResizable(True)
        side_scroll.setFrameShape(QFrame.Shape.NoFrame)
        side_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        split = self.split = QSplitter(Qt.Orientation.Horizontal)
        for w, stretch in ((self.conversations, 0), (center, 1), (side_scroll, 0)):
            split.addWidget(w)
            split.setStretchFactor(split.count() - 1, stretch)
        split.setSizes([240, 760, 280])
        self.setCentralWidget(split)
        self.status_line, self.busy_bar, self.downloads = fill_status_bar(
            self.statusBar(), self.bridge.events
        )

    def _connect(self) -> None:
        e = self.bridge.events
        # Bound methods only: a lambda connected to the engine thread's signals would
        # run on that thread.
        self.loads.wire()
        self.turns.wire()
        self.talk.wire()
        self.tool_actions.wire()
        e.storage_warning.connect(self.show_storage_warning)
        e.placement_needs_confirmation.connect(self.models.ask)
        e.placement_fell_back.connect(self.models.fell_back)
        e.title_made.connect(self._on_title)
        e.conversation_opened.connect(self._on_opened)
        for follow in (e.conversation_created, e.conversation_renamed, e.conversation_imported):
            follow.connect(self.conversations.follow)
        e.conversation_deleted.connect(self.conversations.follow_deletion)
        self.chat.summary_edit_requested.connect(self.talk.edit_summary)
        self.chat.pin_requested.connect(self.talk.pin_message)
        self.conversations.conversation_selected.connect(self.open_conversation)
        self.conversations.message_selected.connect(self.show_message)
        self.conversations.rename_requested.connect(self.bridge.rename_conversation)
        self.conversations.delete_requested.connect(self.bridge.delete_conversation)
        self.theme.changed.connect(self.chat.apply_theme)
        self.downloads.load_requested.connect(self.models.load_downloaded)
        self.conversations.new_requested.connect(self.new_conversation)
        self.offload.placement_requested.connect(self.models.request_placement)
        self.offload.tune_button.clicked.connect(self.tuning.open)

    def _menus(self) -> None:
        bar = self.menuBar()
        model = bar.addMenu("&Model")
        self._action(model, "Choose model…", self.models.choose_model, "Ctrl+M")
        self._action(model, "Settings…", self.models.open_settings, "Ctrl+,")
        self._action(model, "Tune speed and memory…", self.tuning.open, "Ctrl+T")
        self._action(model, "Server…", self.server_dock.show_panel)
        tools = bar.addMenu("&Tools")
        self._action(tools, "MCP servers…", self.tool_actions.open_servers)
        self._action(tools, "Tools in this conversation…", self.tool_actions.open_pick)
        conv = bar.addMenu("&Conversation")
        self._action(conv, "New", self.new_conversation, "Ctrl+N")
        self._action(conv, "Summarize now", self.bridge.summarize)
        self._action(conv, "Export…", self.talk.export_conversation, "Ctrl+E")
        self._action(conv, "Import…", self.talk.import_conversation)
        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "About and diagnostics…", self.show_diagnostics)
        self._action(
            help_menu,
            "Open log folder",
            lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_dir()))),
        )

    def _action(
        self, menu: QMenu, label: str, slot: Callable[[], object], shortcut: str | None = None
    ) -> QAction:
        action = QAction(label, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    # -- conversations --------------------------------------------------------------------
    def new_conversation(self) -> None:
        """A new chat: an empty view, and nothing stored until its first message is sent
        (the application layer then creates it, and the list shows it)."""
        self.conversation_id = None
        self.bridge.run(self.bridge.app.new_chat)
        self.render_conversation()
        self.attached.show_pending(None)
        self.facts_panel.show_conversation(None)
        self.conversations.select(None)

    def _on_opened(self, event: ConversationOpened) -> None:
        """A new chat was stored at its first message: it is the open conversation now."""
        if self.conversation_id is None:
            self.conversation_id = event.conversation_id
            self.conversations.refresh()
            self.conversations.select(event.conversation_id)

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.conversation_id:
            return
        self.conversation_id = conversation_id
        self.bridge.open_conversation(conversation_id)
        self.render_conversation()
        self.attached.show_pending(conversation_id)
        self.conversations.select(conversation_id)

    def render_conversation(self) -> None:
        """Rebuild the view from the stored conversation (on open, edit or import; never
        per token)."""
        if self.conversation_id is None:
            self.chat.clear()
            return
        conversation = self.conversation_id
        items = history_items(
            self.stored.messages(conversation), self.stored.summaries(conversation)
        )
        self.chat.set_history(items)
        self.tool_actions.show_stored()

    # -- model ---------------------------------------------------------------------------
    def start(self) -> None:
        """After the window is shown: load the model, or offer the picker on first run."""
        self.tool_actions.start()  # the servers start at the first turn, off this thread
        s = self.settings
        if s.server_url or (s.load.model_path and os.path.exists(s.load.model_path)):
            self.bridge.start()
        else:
            QTimer.singleShot(0, self.models.choose_model)

    # -- messages, titles ------------------------------------------------------------------
    def ask_for_title(self) -> None:
        """After a reply: the engine thread decides whether it was the first and, if so,
        asks the model for a title (no store reads on the GUI thread per turn)."""
        if self.conversation_id is not None:
            self.bridge.make_title()
            self.bridge.prepare_next()

    def _on_title(self, event: TitleMade) -> None:
        if not self.closing:  # else a title that came back while the window closed
            self.conversations.refresh()
            if event.by_model:
                self.statusBar().showMessage(f"Named “{event.title}”.", 4000)
        self.title_shown.emit(event)

    def show_message(self, conversation_id: int, message_id: int) -> None:
        """A search hit: open its conversation and scroll to the message (loaded if needed)."""
        self.open_conversation(conversation_id)
        self.chat.jump_to(message_id)

    def show_storage_warning(self, event: StorageWarning) -> None:
        self.last_warning = event.message
        self.statusBar().showMessage(event.message, 30000)

    def show_notice(self, title: str, text: str) -> None:
        """Tell the user something once, without stopping the window (not modal)."""
        box = QMessageBox(QMessageBox.Icon.Information, title, text, parent=self)
        box.setModal(False)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.show()
        self.notice = box
        self.statusBar().showMessage(text, 30000)

    def show_diagnostics(self) -> None:
        from vllmchat.ui.dialogs.diagnostics_dialog import DiagnosticsDialog

        dialog = DiagnosticsDialog(self)
        dialog.start()
        dialog.exec()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closing = True
        self._memory_timer.stop()
        self.window_state.save(self.conversation_id)
        self.downloads.join()
        self.workers.join()
        self.server_dock.close_server()  # its clients' states are saved by the engine
        self.bridge.close()
        self.tool_actions.close()
        super().closeEvent(event)
