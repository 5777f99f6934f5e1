"""Menu actions of the main window: dialogs, import/export, settings, memory readout."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import psutil
from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMainWindow, QMessageBox, QSplitter

from vllmchat.core.app.chat_app import NOT_LOCAL
from vllmchat.core.app.events import SettingsChanged, StorageWarning, TitleMade
from vllmchat.core.app_settings import AppSettings, save_app_settings
from vllmchat.core.conversations.store import ConversationStore, StoreError
from vllmchat.core.conversations.transfer import export_file, import_file
from vllmchat.core.engine.events import TurnStats
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.machine import nvml
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import FitSettings, kv_bytes_per_layer
from vllmchat.core.paths import config_dir
from vllmchat.core.tuning.events import TuneFinished
from vllmchat.core.tuning.results import TuneConfig
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.conversation_list import ConversationList
from vllmchat.ui.models.downloads import DownloadsPanel
from vllmchat.ui.offload.memory_panel import MemoryPanel
from vllmchat.ui.offload.offload_panel import OffloadPanel
from vllmchat.ui.offload.tuner_dialog import TunerDialog
from vllmchat.ui.window.engine_bridge import EngineBridge


class WindowActions(QMainWindow):
    """The main window's menu actions; ``MainWindow`` builds the widgets they use."""

    settings: AppSettings
    store: ConversationStore
    bridge: EngineBridge
    info: ModelInfo | None
    desc: ModelDescription | None
    hw: HardwareInfo | None
    last_stats: TurnStats | None
    memory: MemoryPanel
    offload: OffloadPanel
    split: QSplitter
    downloads: DownloadsPanel
    chat: ChatView
    tuner: TunerDialog | None = None
    conversations: ConversationList
    conversation_id: int | None
    input: ChatInput
    unsent: str | None = None  # the message sent last, until the store has it
    live_kv: list[int] | None = None  # [tokens in the KV cache, n_ctx] while a turn runs
    save_settings: bool
    titles_ended: int

    closing = False

    def render_conversation(self) -> None: ...

    def load_model(self, path: str) -> None:
        self.settings = self.settings.for_model(path)
        self._save()
        self.bridge.load(self.settings)

    def set_gpu_layers(self, n: int, n_cpu_moe: int = 0) -> None:
        """Reload live with this placement (GPU layers; for a mixture of experts, the
        layers whose experts stay in RAM)."""
        self.settings = self.settings.with_changes(n_gpu_layers=n, n_cpu_moe=n_cpu_moe)
        self._save()
        self.bridge.load(self.settings, live=True)

    def open_conversation(self, conversation_id: int) -> None:
        raise NotImplementedError

    def _update_memory(self) -> None:
        engine = self.bridge.app.engine
        if not engine.capabilities.local_memory:
            self.memory.show_remote()
            return
        pid = engine.pid
        if self.info is None or pid is None or not engine.alive:
            return
        try:
            rss = psutil.Process(pid).memory_info().rss
        except psutil.Error:
            rss = None
        per_token = 0.0
        if self.desc is not None:
            s = self.settings
            fit = FitSettings(n_ctx=256, type_k=s.type_k, type_v=s.type_v)
            per_token = sum(kv_bytes_per_layer(self.desc, fit)) / 256
        if self.live_kv is not None:  # the turn's prompt and the tokens streamed so far
            kv_tokens, n_ctx = self.live_kv
        else:
            kv_tokens = self.last_stats.kv_tokens if self.last_stats else 0
            n_ctx = self.last_stats.n_ctx if self.last_stats else self.info.n_ctx
        self.memory.update_usage(
            rss=rss,
            vram_process=nvml.process_vram(pid),
            buffers_mib=self.info.buffers_mib,
            kv_tokens=kv_tokens,
            n_ctx=n_ctx,
            kv_bytes_per_token=per_token,
        )

    def count_token(self, _text: str) -> None:
        if self.live_kv is not None:
            self.live_kv[0] += 1

    def choose_model(self) -> None:
        from vllmchat.ui.models.model_picker import ModelPicker

        s = self.settings
        picker = ModelPicker(
            self.hw,
            s.fit_settings(),
            folders=s.model_folders,
            first_run=not s.model_path,
            downloads=self.downloads,
            parent=self,
        )
        if not picker.exec():
            return
        if picker.chosen_server is not None:
            self.use_server(*picker.chosen_server)
        elif picker.chosen_path:
            self.settings = self.settings.for_model(
                picker.chosen_path, server_url="", server_model=""
            )
            self._save()
            self.bridge.use_local(self.settings)

    def use_server(self, url: str, model: str) -> None:
        """Chat through a server from now on (remembered; the key is in the keyring)."""
        self.settings = self.settings.with_changes(server_url=url, server_model=model)
        self._save()
        self.bridge.use_server(self.settings)

    # -- titles, search hits, window state ------------------------------------------------
    def load_downloaded(self, path: str) -> None:
        """Load a model the downloads panel finished (the picker may be long closed)."""
        self.downloads.hide()
        self.settings = self.settings.for_model(path, server_url="", server_model="")
        self._save()
        self.bridge.use_local(self.settings)

    def ask_for_title(self) -> None:
        """After a reply: the engine thread decides whether it was the first and, if so,
        asks the model for a title (no store reads on the GUI thread per turn)."""
        if self.conversation_id is not None:
            self.bridge.make_title()
            self.bridge.prepare_next()

    def _on_title(self, event: TitleMade) -> None:
        self.titles_ended += 1
        if self.closing:
            return  # a title that came back while the window closed
        self.conversations.refresh()
        if event.by_model:
            self.statusBar().showMessage(f"Named “{event.title}”.", 4000)

    def show_message(self, conversation_id: int, message_id: int) -> None:
        """A search hit: open its conversation and scroll to the message (loaded if needed)."""
        self.open_conversation(conversation_id)
        self.chat.jump_to(message_id)

    def _window_state(self) -> QSettings:
        return QSettings(str(config_dir() / "window.ini"), QSettings.Format.IniFormat)

    def _conversation_key(self) -> str:
        """The open conversation is remembered per conversation database."""
        digest = hashlib.sha256(str(self.store.file.resolve()).encode()).hexdigest()[:12]
        return f"conversation/{digest}"

    def restore_window_state(self) -> int | None:
        """Size, splitter positions; returns the conversation open when the app last closed."""
        state = self._window_state()
        geometry = state.value("geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        split = state.value("splitter")
        if isinstance(split, QByteArray):
            self.split.restoreState(split)
        last = state.value(self._conversation_key())
        try:
            return int(last) if last is not None else None
        except (TypeError, ValueError):
            return None

    def save_window_state(self) -> None:
        state = self._window_state()
        state.setValue("geometry", self.saveGeometry())
        state.setValue("splitter", self.split.saveState())
        if self.conversation_id is not None:
            state.setValue(self._conversation_key(), self.conversation_id)
        state.sync()

    def open_tuner(self) -> None:
        """The tuner window (non-modal), wired to the application layer."""
        if self.tuner is None:
            dialog = TunerDialog(self)
            events = self.bridge.events
            events.tune_started.connect(dialog.on_started)
            events.tune_point.connect(dialog.on_point)
            events.tune_finished.connect(dialog.on_finished)
            events.tune_finished.connect(self._on_tuned)
            dialog.start_requested.connect(self._start_tune)
            dialog.stop_requested.connect(self.bridge.stop_tune)
            dialog.apply_requested.connect(self.apply_tune)
            self.tuner = dialog
        if not self.bridge.app.engine.capabilities.tuning:
            self.tuner.show_unavailable(NOT_LOCAL)
        self.tuner.show()
        self.tuner.raise_()

    def _start_tune(self, budget_s: float, fresh: bool) -> None:
        self.bridge.tune(budget_s, fresh=True)  # the window's button always measures anew

    def apply_tune(self, config: TuneConfig) -> None:
        self.settings = replace(self.settings, load=config.apply_to(self.settings.load))
        self._save()
        self.bridge.apply_tune(config)

    def _on_tuned(self, event: TuneFinished) -> None:
        self.offload.show_tuning(event.result)

    def edit_summary(self, summary_id: int) -> None:
        text, ok = QInputDialog.getMultiLineText(
            self, "Edit summary", "Summary:", self.store.summary(summary_id).content
        )
        if ok and text.strip():
            self.store.edit_summary(summary_id, text.strip())
            self.render_conversation()

    def pin_message(self, message_id: int, pinned: bool) -> None:
        """Pin or unpin a message (it stays word for word in every prompt)."""
        try:
            self.store.set_pinned(message_id, pinned)
        except StoreError as exc:
            self.statusBar().showMessage(str(exc), 8000)
            return
        for widget in self.chat.messages():
            if widget.message_id == message_id:
                widget.set_pinned(pinned)
        text = "stays word for word in every prompt" if pinned else "is summarized like others"
        self.statusBar().showMessage(f"Message {'pinned' if pinned else 'unpinned'}: it {text}.",
                                     8000)  # fmt: skip

    def restore_unsent(self) -> None:
        """A message the store never took goes back into the input box: nothing typed
        is lost, and sending again works once the cause is gone."""
        text, self.unsent = self.unsent, None
        if text is None:
            return
        self.chat.remove_unsaved_message()
        if not self.input.edit.toPlainText().strip():
            self.input.edit.setPlainText(text)

    def adopt_settings(self, event: SettingsChanged) -> None:
        """The application layer's settings are the window's (it owns them)."""
        if event.settings != self.settings:
            self.settings = event.settings
            self._save()

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

    def open_settings(self) -> None:
        from vllmchat.ui.dialogs.settings_dialog import SettingsDialog

        dialog = SettingsDialog(self.settings, self)
        if not dialog.exec():
            return
        new = dialog.result_settings()
        if new is None:
            return
        reload = new.needs_reload(self.settings) and self.info is not None
        self.settings = new
        self._save()
        if reload:  # the application layer takes the settings once the model holds them
            self.bridge.load(new, live=True)
        else:
            self.bridge.configure(new)

    def export_conversation(self) -> None:
        if self.conversation_id is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export", str(Path.home() / "chat.md"), "Markdown (*.md);;JSON (*.json)"
        )
        if path:
            export_file(self.store, self.conversation_id, path)

    def import_conversation(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import", str(Path.home()), "JSON (*.json)")
        if not path:
            return
        try:
            conv = import_file(self.store, path)
        except StoreError as exc:
            QMessageBox.warning(self, "Import", str(exc))
            return
        self.conversations.refresh()
        self.conversations.select(conv.id)

    def _save(self) -> None:
        if self.save_settings:
            try:
                save_app_settings(self.settings)
            except OSError as exc:
                self.statusBar().showMessage(f"Settings not saved: {exc.strerror}", 8000)
