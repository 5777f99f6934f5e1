"""The window's model actions: choosing a model or a server, the settings dialog, the
offload slider's placements (asked about past the estimate's bound), and the tuner.

Each action object is given what it uses; none keeps a copy of the settings. They
send intents to the application layer through the bridge and read its snapshot.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox, QWidget

from vllmchat.core.app.events import PlacementFellBack, PlacementNeedsConfirmation
from vllmchat.core.app.placement.tuning import NOT_LOCAL
from vllmchat.core.models.overhead import learned_overhead
from vllmchat.core.placement import Placement
from vllmchat.core.tuning.events import TuneFinished
from vllmchat.core.tuning.results import TuneConfig
from vllmchat.ui.models.downloads import DownloadsPanel
from vllmchat.ui.offload.offload_panel import OffloadPanel
from vllmchat.ui.offload.tuner_dialog import TunerDialog
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

Notify = Callable[[str, str], None]  # (title, text): tell the user without stopping them


class ModelActions(QObject):
    """Choose a model or a server, edit the settings, place the weights (a QObject of
    the GUI thread: the engine thread's signals reach its methods there)."""

    def __init__(
        self,
        bridge: EngineBridge,
        parent: QWidget,
        offload: OffloadPanel,
        downloads: DownloadsPanel,
        notify: Notify,
    ) -> None:
        super().__init__(parent)
        self.bridge, self.window, self.offload = bridge, parent, offload
        self.downloads, self.notify = downloads, notify
        self.confirmation: QMessageBox | None = None  # open while a placement is asked about

    def choose_model(self, *, vision_only: bool = False) -> None:
        """The model picker; ``vision_only``: it lists only models that take images."""
        from vllmchat.ui.models.model_picker import ModelPicker

        snapshot = self.bridge.snapshot
        s = snapshot.settings
        overhead = learned_overhead(snapshot.hardware) if snapshot.hardware else None
        picker = ModelPicker(
            snapshot.room,
            s.fit_settings(overhead),
            folders=s.model_folders,
            first_run=not s.load.model_path,
            downloads=self.downloads,
            model_path=s.load.model_path if snapshot.info is not None else "",
            draft=s.load.draft_model,
            parent=self.window,
        )
        if vision_only:
            picker.show_vision_only()
        if not picker.exec():
            return
        if picker.chosen_server is not None:
            self.use_server(*picker.chosen_server)
        elif picker.chosen_draft is not None:
            self.bridge.configure(draft_model=picker.chosen_draft)
        elif picker.chosen_path:
            self.load_model(picker.chosen_path)

    def load_model(self, path: str) -> None:
        """Chat with the model file at ``path`` (on the local engine)."""
        self.bridge.open_model(path)

    def load_downloaded(self, path: str) -> None:
        """Load a model the downloads panel finished (the picker may be long closed)."""
        self.downloads.hide()
        self.load_model(path)

    def use_server(self, url: str, model: str) -> None:
        """Chat through a server from now on (remembered once it answers)."""
        self.bridge.use_server(url, model)

    def open_settings(self) -> None:
        from vllmchat.ui.dialogs.settings_dialog import SettingsDialog

        dialog = SettingsDialog(self.bridge.snapshot.settings, self.window)
        if not dialog.exec():
            return
        new = dialog.result_settings()
        if new is not None and (changes := new.changes_from(dialog.original)):
            self.bridge.configure(**changes)  # load settings reload live

    # -- placements ---------------------------------------------------------------------
    def request_placement(self, placement: Placement) -> None:
        """The slider's placement: loaded at once within the estimate's bound, asked
        about at or past it (as the application layer's estimate shown says)."""
        why = self.offload.past_bound(placement)
        if why:
            self.ask(PlacementNeedsConfirmation(placement, why))
        else:
            self.bridge.set_placement(placement)

    def ask(self, event: PlacementNeedsConfirmation) -> None:
        """Ask before loading a placement past the estimate's bound (not modal to the
        app: the window keeps painting); No puts the slider back."""
        if self.confirmation is not None:
            self.confirmation.close()
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Past the memory estimate",
            f"{event.message}\n\nLoad {event.placement.label()} anyway? If the engine "
            "cannot run there, it comes back at the current placement.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            self.window,
        )
        box.setDefaultButton(QMessageBox.StandardButton.No)
        box.finished.connect(lambda _result: self._answered(box, event.placement))
        self.confirmation = box
        box.open()

    def _answered(self, box: QMessageBox, placement: Placement) -> None:
        self.confirmation = None
        if box.clickedButton() is box.button(QMessageBox.StandardButton.Yes):
            self.bridge.set_placement(placement, confirmed=True)
        else:
            self.offload.follow(self.offload.fit_settings)  # what runs, as announced

    def fell_back(self, event: PlacementFellBack) -> None:
        self.notify("Placement taken back", event.message)


class TunerActions(QObject):
    """The tuner window (non-modal), wired to the application layer."""

    def __init__(self, bridge: EngineBridge, parent: QWidget, offload: OffloadPanel) -> None:
        super().__init__(parent)
        self.bridge, self.window, self.offload = bridge, parent, offload
        self.dialog: TunerDialog | None = None

    def open(self) -> None:
        if self.dialog is None:
            dialog = TunerDialog(self.window)
            events = self.bridge.events
            events.tune_started.connect(dialog.on_started)
            events.tune_point.connect(dialog.on_point)
            events.tune_finished.connect(dialog.on_finished)
            events.tune_finished.connect(self._on_tuned)
            dialog.start_requested.connect(self._start)
            dialog.stop_requested.connect(self.bridge.stop_tune)
            dialog.apply_requested.connect(self.apply)
            self.dialog = dialog
        if not self.bridge.snapshot.capabilities.tuning:
            self.dialog.show_unavailable(NOT_LOCAL)
        self.dialog.show()
        self.dialog.raise_()

    def _start(self, budget_s: float, fresh: bool) -> None:
        self.bridge.tune(budget_s, fresh=True)  # the window's button always measures anew

    def apply(self, config: TuneConfig) -> None:
        self.bridge.apply_tune(config)

    def _on_tuned(self, event: TuneFinished) -> None:
        self.offload.show_tuning(event.result)
