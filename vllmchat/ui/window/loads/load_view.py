"""The model's loads as the window shows them: input waits while one runs, then the
status line, the offload and memory panels follow; a failure is said where it
applies, and an engine that ended shows the banner. The offload panel's estimates
are the application layer's: each placement the sliders show is proposed to it
once, and its answer is shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMainWindow, QProgressBar

from vllmchat.core.app.events import EngineDied, Loaded, LoadFailed, LoadStarted, SettingsChanged
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.models.advisor import quant_label
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.models.overhead import learned_overhead
from vllmchat.core.placement import Placement
from vllmchat.core.tuning.cache import TuneCache
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.offload.memory_panel import MemoryPanel
from vllmchat.ui.offload.offload_panel import OffloadPanel
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge
from vllmchat.ui.window.readouts.banner import EngineBanner
from vllmchat.ui.window.readouts.status_line import StatusLine


class LoadView(QObject):
    """Given the widgets a load changes; ``info``, ``desc`` and ``hw`` are the last
    load's, as its event told them. (A QObject of the GUI thread: the engine thread's
    signals reach its methods there.)"""

    load_ended = Signal(object)
    """``Loaded`` or ``LoadFailed``: a load or a live reload ended, and the widgets show it."""

    def __init__(
        self,
        bridge: EngineBridge,
        window: QMainWindow,
        chat_input: ChatInput,
        panels: tuple[OffloadPanel, MemoryPanel],
        banner: EngineBanner,
        status_line: StatusLine,
        busy_bar: QProgressBar,
    ) -> None:
        super().__init__(window)
        self.bridge, self.window, self.input = bridge, window, chat_input
        self.offload, self.memory = panels
        self.banner, self.status_line, self.busy_bar = banner, status_line, busy_bar
        self.info: ModelInfo | None = None
        self.desc: ModelDescription | None = None
        self.hw: HardwareInfo | None = None
        self.loading = False
        self.last: Any = None  # the last ``ReloadResult`` or ``LoadFailed``

    def wire(self) -> None:
        e = self.bridge.events
        e.load_started.connect(self.started)
        e.load_finished.connect(self.loaded)
        e.load_failed.connect(self.failed)
        e.settings_changed.connect(self.settings_changed)
        e.engine_died.connect(self.died)
        e.placement_proposed.connect(self.offload.show_proposal)
        self.offload.placement_shown.connect(self.propose)
        self.banner.restart_requested.connect(self.restart)
        self.banner.restart_fewer_layers_requested.connect(self.restart_with_fewer_layers)

    def fit(self) -> FitSettings:
        """The memory-relevant settings the application layer runs with, for estimates."""
        snapshot = self.bridge.snapshot
        room = snapshot.room
        return snapshot.settings.fit_settings(learned_overhead(room) if room else None)

    def propose(self, placement: Placement) -> None:
        """Ask the application layer for the estimate of what the sliders show (a query
        run here, at once; its event reaches the panel)."""
        self.bridge.run_as("now", "propose_placement", placement)

    def restart(self) -> None:
        self.banner.hide()
        self.bridge.restart()

    def restart_with_fewer_layers(self) -> None:
        self.banner.hide()
        self.bridge.restart(fewer_layers=True)

    def set_loading(self, loading: bool) -> None:
        self.loading = loading
        self.input.set_loading(loading)
        self.offload.set_busy(loading)
        self.busy_bar.setVisible(loading)
        if loading:
            self.window.statusBar().showMessage("Loading the model…")

    def started(self, _event: LoadStarted) -> None:
        self.set_loading(True)

    def loaded(self, event: Loaded) -> None:
        self.last = event.reload
        info, reload = event.info, event.reload
        self.info = info
        self.set_loading(False)
        self.memory.clear_error()
        self.input.edit.setFocus()  # ready to type, also right after the first-run picker
        self.status_line.set_model(info.name, quant_label(Path(info.path).name), info.n_ctx)
        note = ""
        if reload is not None:
            note = (
                f"Reloaded in {reload.seconds:.2f}s; the KV cache of "
                f"{reload.tokens} tokens was kept."
                if reload.restored
                else f"Reloaded; the history will be read again ({reload.reason})."
            )
        message = note or f"{info.name} loaded in {info.load_s:.2f}s."
        self.window.statusBar().showMessage(message, 8000)
        self.offload.show_measured(info.buffers_mib, None)
        self.desc, self.hw = event.description, event.hardware
        snapshot = self.bridge.snapshot  # as of this event
        if not snapshot.capabilities.offload:
            reason = self.hw.offload_reason if self.hw else "The server owns the model's memory."
            self.offload.show_remote(reason + " The tuner measures local models only.")
            self.memory.show_remote()
        elif self.desc is not None and snapshot.room is not None:
            self.offload.set_model(self.desc, snapshot.room, self.fit())
            cached = TuneCache().get(
                snapshot.settings.load, snapshot.room, snapshot.settings.gpu_margin_mib
            )
            if cached is not None:  # measured before on this device: marks on the slider
                self.offload.show_tuning(cached)
        self.offload.set_busy(self.loading)
        self.load_ended.emit(event)

    def failed(self, event: LoadFailed) -> None:
        self.last = event
        self.set_loading(False)
        self.memory.show_error(event.kind.value, event.message, event.fix)
        self.window.statusBar().showMessage(event.message, 20000)
        self.offload.follow(self.fit())  # the placement that runs, not the one that failed
        snapshot = self.bridge.snapshot
        if not snapshot.alive:
            fewer = snapshot.settings.load.placement.uses_gpu
            self.banner.show_reason(event.message, fewer_layers_possible=fewer)
        self.load_ended.emit(event)

    def settings_changed(self, _event: SettingsChanged) -> None:
        """The application layer's settings changed: the panel follows (no echo)."""
        if self.offload.desc is not None:
            self.offload.follow(self.fit())

    def died(self, event: EngineDied) -> None:
        self.input.set_generating(False)
        fewer = self.bridge.snapshot.settings.load.placement.uses_gpu
        self.banner.show_reason(event.reason, fewer_layers_possible=fewer)
