"""The main window: conversations, chat, offload and memory panels, status line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QInputDialog,
    QMenu,
    QProgressBar,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.events import (
    EngineDied,
    Loaded,
    LoadFailed,
    LoadStarted,
    SettingsChanged,
    TurnStarted,
)
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import MessageStored, PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.kv_cache import KVStateCache
from vllmchat.core.conversations.store import ConversationStore
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, TurnStats
from vllmchat.core.engine.info import ReloadResult
from vllmchat.core.models.advisor import quant_label
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.models.overhead import learned_overhead
from vllmchat.core.paths import log_dir
from vllmchat.core.tuning.cache import TuneCache
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.chat.chat_view import ChatView, HistoryItem
from vllmchat.ui.chat.conversation_list import ConversationList
from vllmchat.ui.chat.facts_panel import facts_panel
from vllmchat.ui.chat.markdown_render import warm_up
from vllmchat.ui.common.theme import ThemeWatcher
from vllmchat.ui.common.workers import WorkerGroup
from vllmchat.ui.models.downloads import DownloadsPanel
from vllmchat.ui.offload.memory_panel import MemoryPanel
from vllmchat.ui.offload.offload_panel import OffloadPanel
from vllmchat.ui.window.banner import EngineBanner
from vllmchat.ui.window.engine_bridge import EngineBridge
from vllmchat.ui.window.status_line import StatusLine
from vllmchat.ui.window.window_actions import WindowActions


class MainWindow(WindowActions):
    """Everything a chat needs; slow work happens on the engine thread or workers."""

    def __init__(
        self,
        store: ConversationStore,
        settings: AppSettings,
        kv: KVStateCache,
        *,
        save_settings: bool = True,
    ) -> None:
        super().__init__()
        self.setWindowTitle("vllmchat")
        self.resize(1280, 800)
        self.store, self.settings, self.kv = store, settings, kv
        self.save_settings = save_settings
        self.workers = WorkerGroup(self)
        self._warm_up = warm_up(self)
        self.bridge = EngineBridge(store, kv, self)
        self.theme = ThemeWatcher(self)
        self.info = None
        self.desc = None
        self.hw = None
        self.last_stats = None
        self.loading = False
        self.conversation_id: int | None = None
        # Counters the GUI thread updates when a turn, load or title ends (tests, benchmarks).
        self.turns_ended = 0
        self.titles_ended = 0
        self.last_turn: DoneEvent | ErrorEvent | None = None
        self.loads_ended = 0
        self.last_load: ReloadResult | LoadFailed | None = None
        self._build()
        self._connect()
        self._menus()
        existing = store.conversations()
        last = self.restore_window_state()
        if last is not None and any(c.id == last for c in existing):
            self.open_conversation(last)
        else:
            self.open_conversation(existing[0].id if existing else self.new_conversation(False))
        self.conversations.refresh()
        self.conversations.select(self.conversation_id or 0)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(2000)
        self._memory_timer.timeout.connect(self._update_memory)
        self._memory_timer.start()

    # -- layout ---------------------------------------------------------------------
    def _build(self) -> None:
        self.conversations = ConversationList(self.store)
        self.banner = EngineBanner()
        self.chat = ChatView()
        self.input = ChatInput()
        center = QWidget()
        v = QVBoxLayout(center)
        v.addWidget(self.banner)
        v.addWidget(self.chat, 1)
        v.addWidget(self.input)
        self.offload, self.memory = OffloadPanel(), MemoryPanel()
        side = QWidget()
        s = QVBoxLayout(side)
        for panel in (self.offload, self.memory, facts_panel(self)):
            s.addWidget(panel)
        s.addStretch()
        split = self.split = QSplitter(Qt.Orientation.Horizontal)
        for w, stretch in ((self.conversations, 0), (center, 1), (side, 0)):
            split.addWidget(w)
            split.setStretchFactor(split.count() - 1, stretch)
        split.setSizes([240, 760, 280])
        self.setCentralWidget(split)
        self.status_line = StatusLine(self.bridge.events)  # follows loads for the identity mark
        self.statusBar().addPermanentWidget(self.status_line, 1)
        self.busy_bar = QProgressBar()
        self.busy_bar.setRange(0, 0)  # indeterminate while the model loads
        self.busy_bar.setMaximumWidth(140)
        self.busy_bar.hide()
        self.statusBar().addPermanentWidget(self.busy_bar)
        self.downloads = DownloadsPanel()
        self.statusBar().addPermanentWidget(self.downloads)
        self.downloads.hide()  # until a download starts

    def _connect(self) -> None:
        e = self.bridge.events
        # Bound methods only: a lambda connected to the engine thread's signals would
        # run on that thread.
        e.load_started.connect(self._on_load_started)
        e.load_finished.connect(self._on_loaded)
        e.load_failed.connect(self._on_load_failed)
        e.turn_started.connect(self._on_turn_started)
        e.token_received.connect(self.chat.append_token)
        e.token_received.connect(self.count_token)
        e.thinking_received.connect(self.chat.append_thinking)
        e.thought_for.connect(self.chat.thought_for)
        e.prefill_progress.connect(self._on_prefill)
        e.prompt_planned.connect(self._on_plan)
        e.summary_changed.connect(self._on_summary)
        e.stats_ready.connect(self._on_stats)
        e.turn_finished.connect(self._on_done)
        e.turn_failed.connect(self._on_failed)
        e.message_stored.connect(self._on_message_stored)
        e.engine_died.connect(self._on_died)
        e.storage_warning.connect(self.show_storage_warning)
        e.settings_changed.connect(self.adopt_settings)
        self.input.send_requested.connect(self.send)
        self.input.stop_requested.connect(self.bridge.stop)
        self.chat.regenerate_requested.connect(self.regenerate)
        self.chat.edit_requested.connect(self.edit_message)
        self.chat.summary_edit_requested.connect(self.edit_summary)
        self.chat.pin_requested.connect(self.pin_message)
        self.conversations.conversation_selected.connect(self.open_conversation)
        self.conversations.message_selected.connect(self.show_message)
        e.title_made.connect(self._on_title)
        self.theme.changed.connect(self.chat.apply_theme)
        self.downloads.load_requested.connect(self.load_downloaded)
        self.conversations.new_requested.connect(self.new_conversation)
        self.offload.reload_requested.connect(self.set_gpu_layers)
        self.offload.tune_button.clicked.connect(self.open_tuner)
        self.banner.restart_requested.connect(lambda: self.restart(fewer_layers=False))
        self.banner.restart_fewer_layers_requested.connect(lambda: self.restart(fewer_layers=True))

    def _menus(self) -> None:
        bar = self.menuBar()
        model = bar.addMenu("&Model")
        self._action(model, "Choose model…", self.choose_model, "Ctrl+M")
        self._action(model, "Settings…", self.open_settings, "Ctrl+,")
        self._action(model, "Tune speed and memory…", self.open_tuner, "Ctrl+T")
        conv = bar.addMenu("&Conversation")
        self._action(conv, "New", lambda: self.new_conversation(), "Ctrl+N")
        self._action(conv, "Summarize now", self.bridge.summarize)
        self._action(conv, "Export…", self.export_conversation, "Ctrl+E")
        self._action(conv, "Import…", self.import_conversation)
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
    def new_conversation(self, select: bool = True) -> int:
        conv = self.store.create(system_prompt=self.settings.system_prompt)
        if select:
            self.conversations.refresh()
            self.conversations.select(conv.id)
        return conv.id

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.conversation_id:
            return
        self.conversation_id = conversation_id
        self.bridge.open_conversation(conversation_id)
        self.render_conversation()
        self.conversations.select(conversation_id)

    def render_conversation(self) -> None:
        """Rebuild the view from the store (on open, edit or import; never per token)."""
        if self.conversation_id is None:
            self.chat.clear()
            return
        path = self.store.path_to_show(self.conversation_id)
        summaries = {s.last_message_id: s for s in self.store.summaries(self.conversation_id)}
        items: list[HistoryItem] = []
        for m in path:
            last_reply = m is path[-1] and m.role == "assistant"
            items.append(HistoryItem(m.role, m.content, m.id, m.partial, last_reply, m.pinned,
                                     m.thinking, m.stats.get("thinking_s")))  # fmt: skip
            if m.id in summaries:
                items.append(HistoryItem("summary", summaries[m.id].content, summaries[m.id].id))
        self.chat.set_history(items)

    # -- turns ---------------------------------------------------------------------------
    def send(self, text: str) -> None:
        if self.info is None:
            self.statusBar().showMessage("Load a model first (Model → Choose model…).")
            return
        self.chat.add_message("user", text)
        self.chat.start_reply()
        self.unsent = text  # until the store has it
        self.bridge.send(text)

    def regenerate(self) -> None:
        self.chat.remove_last_reply()
        self.chat.start_reply()
        self.bridge.regenerate()

    def edit_message(self, message_id: int) -> None:
        original = self.store.message(message_id)
        text, ok = QInputDialog.getMultiLineText(self, "Edit message", "Message:", original.content)
        if not ok or not text.strip():
            return
        self.chat.remove_from(message_id)
        self.chat.add_message("user", text)
        self.chat.start_reply()
        self.bridge.edit(message_id, text)

    def _on_load_started(self, _event: LoadStarted) -> None:
        self._set_loading(True)

    def _on_turn_started(self, _event: TurnStarted) -> None:
        self.input.set_generating(True)

    def _on_message_stored(self, event: MessageStored) -> None:
        self.chat.set_message_id(event.message_id, event.role)
        if event.role == "user":
            self.unsent = None

    def _on_prefill(self, done: int, total: int) -> None:
        self.statusBar().showMessage(f"Reading prompt {done}/{total}…")

    def _on_plan(self, plan: PromptPlanEvent) -> None:
        self.live_kv = [plan.prompt_tokens, plan.n_ctx]
        summary = self.store.summary(plan.summary_id) if plan.summary_id else None
        self.status_line.set_plan(plan.prompt_tokens, plan.n_ctx, summary.tokens if summary else 0,
                                  plan.pinned_tokens)  # fmt: skip
        if plan.dropped_messages:
            self.statusBar().showMessage(
                f"The {plan.dropped_messages} oldest messages are left out of this turn.", 8000
            )

    def _on_summary(self, event: SummaryEvent) -> None:
        self.statusBar().showMessage(event.message, 8000)
        if event.status == "done" and event.summary_id is not None:
            after = self.store.summary(event.summary_id).last_message_id
            self.chat.insert_summary(event.text, event.summary_id, after)

    def _on_stats(self, stats: TurnStats) -> None:
        self.last_stats, self.live_kv = stats, None
        self.status_line.set_stats(stats)

    def _on_done(self, event: DoneEvent) -> None:
        self.turns_ended += 1
        self.last_turn = event
        self.chat.finish_reply(event.text, partial=event.stop_reason == "stopped")
        self.input.set_generating(False)
        self.statusBar().clearMessage()
        self.conversations.refresh()
        self._update_memory()
        if self.info is not None:
            self.offload.show_measured(self.info.buffers_mib, event.stats.decode_tok_s)
        self.ask_for_title()

    def _on_failed(self, event: ErrorEvent) -> None:
        self.turns_ended += 1
        self.last_turn = event
        self.input.set_generating(False)
        if event.partial_text:
            self.chat.finish_reply(event.partial_text, partial=True)
        else:
            self.chat.discard_reply()
        self._set_loading(False) if self.loading else None
        self.restore_unsent()
        if event.kind == ErrorKind.ENGINE_DIED:
            return  # the banner comes with the EngineDied event
        self.memory.show_error(event.kind.value, event.message)
        self.statusBar().showMessage(f"{event.message} {event.fix}".strip(), 15000)

    # -- model ---------------------------------------------------------------------------
    def restart(self, *, fewer_layers: bool) -> None:
        self.banner.hide()
        self.bridge.restart(fewer_layers=fewer_layers)

    def _set_loading(self, loading: bool) -> None:
        self.loading = loading
        self.input.set_loading(loading)
        self.offload.set_busy(loading)
        self.busy_bar.setVisible(loading)
        if loading:
            self.statusBar().showMessage("Loading the model…")

    def _on_loaded(self, event: Loaded) -> None:
        self.loads_ended += 1
        self.last_load = event.reload
        info, reload = event.info, event.reload
        self.info = info
        if event.settings.n_gpu_layers != self.settings.n_gpu_layers:  # fewer after a crash
            self.settings = self.settings.with_changes(n_gpu_layers=event.settings.n_gpu_layers)
            self._save()
        self._set_loading(False)
        self.memory.clear_error()
        self.input.edit.setFocus()  # ready to type, also right after the first-run picker
        quant = quant_label(Path(info.path).name)
        self.status_line.set_model(info.name, quant, info.n_ctx)
        note = ""
        if reload is not None:
            note = (
                f"Reloaded in {reload.seconds:.2f}s; the KV cache of "
                f"{reload.tokens} tokens was kept."
                if reload.restored
                else f"Reloaded; the history will be read again ({reload.reason})."
            )
        self.statusBar().showMessage(note or f"{info.name} loaded in {info.load_s:.2f}s.", 8000)
        self.offload.show_measured(info.buffers_mib, None)
        self.desc, self.hw = event.description, event.hardware
        if not self.bridge.app.engine.capabilities.offload:
            reason = self.hw.offload_reason if self.hw else "The server owns the model's memory."
            self.offload.show_remote(reason + " The tuner measures local models only.")
            self.memory.show_remote()
        elif self.desc is not None and self.hw is not None:
            self.offload.set_model(self.desc, self.hw, self._fit(), self.settings.n_gpu_layers,
                                   self.settings.n_cpu_moe)  # fmt: skip
            cached = TuneCache().get(self.settings.load, self.hw, self.settings.gpu_margin_mib)
            if cached is not None:  # measured before on this device: marks on the slider
                self.offload.show_tuning(cached)
        self.offload.set_busy(self.loading)

    def _on_load_failed(self, event: LoadFailed) -> None:
        self.loads_ended += 1
        self.last_load = event
        self._set_loading(False)
        self.memory.show_error(event.kind.value, event.message, event.fix)
        self.statusBar().showMessage(event.message, 20000)
        if self.info is not None and self.bridge.app.engine.info is not None:
            self.adopt_settings(SettingsChanged(self.bridge.app.settings))  # what still runs
        if not self.bridge.app.engine.alive:
            self.banner.show_reason(
                event.message, fewer_layers_possible=self.settings.n_gpu_layers > 0
            )

    def _on_died(self, event: EngineDied) -> None:
        self.input.set_generating(False)
        self.banner.show_reason(event.reason, fewer_layers_possible=self.settings.n_gpu_layers > 0)

    def start(self) -> None:
        """After the window is shown: load the model, or offer the picker on first run."""
        path = self.settings.model_path
        if self.settings.server_url:
            self.bridge.use_server(self.settings)
        elif path and os.path.exists(path):
            self.bridge.load(self.settings)
        else:
            QTimer.singleShot(0, self.choose_model)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closing = True
        self._memory_timer.stop()
        self.save_window_state()
        self.downloads.join()
        self.workers.join()
        self.bridge.close()
        super().closeEvent(event)

    def _fit(self) -> FitSettings:
        """The memory-relevant settings, for estimates."""
        return self.settings.fit_settings(learned_overhead(self.hw) if self.hw else None)
