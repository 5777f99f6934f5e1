"""Pick a model: installed ones with their fit, or browse the hub and download a quant."""

from __future__ import annotations

import functools
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.model_check import check_model_file
from vllmchat.core.models.advisor import NO_FIT, best_fit
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware import HardwareInfo, quick_probe
from vllmchat.core.models.local import LocalModel, discover
from vllmchat.core.models.memory import FitSettings, projector_need
from vllmchat.ui.common.workers import WorkerGroup
from vllmchat.ui.models.downloads import DownloadsPanel
from vllmchat.ui.models.draft_field import DraftTab
from vllmchat.ui.models.fit_badge import BADGE_COLORS, badge, size_text, tint
from vllmchat.ui.models.hub_tab import HubTab
from vllmchat.ui.models.servers_tab import ServersTab

InstalledRow = tuple[LocalModel, str, str, str, str]
"""An installed model, its fit's kind, the badge's words and colour, the fit's message."""


def _local_rows(models: list[LocalModel], hw: HardwareInfo, s: FitSettings) -> list[InstalledRow]:
    rows: list[InstalledRow] = []
    for m in models:
        try:
            own = s.with_projector(projector_need(m.projector))  # its own projector
            fit = best_fit(describe(check_model_file(m.path)), hw, own)
            text, color = badge(fit)
            rows.append((m, fit.kind, text, color, fit.message))
        except EngineError as exc:
            rows.append((m, NO_FIT, "does not fit", BADGE_COLORS[NO_FIT], str(exc)))
    return rows


def _installed_rows(
    folders: tuple[str, ...], hw: HardwareInfo, s: FitSettings
) -> list[InstalledRow]:
    """The installed models in ``folders``, each with its fit here (on a worker)."""
    return _local_rows(discover(folders), hw, s)


class ModelPicker(QDialog):
    """``chosen_path`` (a local file) or ``chosen_server`` is set when it is accepted."""

    def __init__(
        self,
        hw: HardwareInfo | None,
        settings: FitSettings,
        *,
        folders: list[str] | None = None,
        first_run: bool = False,
        downloads: DownloadsPanel | None = None,
        model_path: str = "",  # the model loaded, for its Draft models tab
        draft: str = "",  # and its draft model, if any
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Choose a model")
        self.resize(860, 560)
        self.hw = hw or quick_probe()  # before any model is loaded: RAM and NVML GPUs
        self.fit_settings = settings
        self.folders = folders or []
        self.chosen_path: str | None = None
        self.chosen_server: tuple[str, str] | None = None  # (url, model)
        self.chosen_draft: str | None = None  # a draft model for the loaded one ('' none)
        self.workers = WorkerGroup(self)
        # Downloads run in the window's panel, so they go on after this dialog closes.
        self.downloads = downloads or DownloadsPanel(self)
        layout = QVBoxLayout(self)
        if first_run:
            hello = QLabel(
                "<b>Welcome.</b> No model yet: start with the small demo model "
                "(it ships with vllmchat and works offline), or pick one below."
            )
            hello.setWordWrap(True)
            layout.addWidget(hello)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._installed_tab(), "Installed")
        self.hub = HubTab(self.hw, settings, self.workers, self.downloads)
        self.hub.told.connect(self.status.setText)
        self.hub.downloaded.connect(self._downloaded)
        self.tabs.addTab(self.hub, "Hub")
        self.servers = ServersTab()
        self.servers.server_chosen.connect(self._use_server)
        self.tabs.addTab(self.servers, "Servers")
        self.drafts = DraftTab(model_path, draft, self.folders)
        self.drafts.chosen.connect(self._use_draft)
        self.tabs.addTab(self.drafts, "Draft models")
        layout.addWidget(self.tabs)
        row = QHBoxLayout()
        self.demo = QPushButton("Use the demo model (offline)")
        self.demo.clicked.connect(self._use_demo)
        self.open_file = QPushButton("Open a .gguf file…")
        self.open_file.clicked.connect(self._open_file)
        row.addWidget(self.demo)
        row.addWidget(self.open_file)
        row.addWidget(self.status, 1)
        layout.addLayout(row)
        self.refresh_installed()

    # -- installed -------------------------------------------------------------------
    def _installed_tab(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        self.installed = QTableWidget(0, 4)
        self.installed.setHorizontalHeaderLabels(["Model", "Quant", "Size", "Fit on this machine"])
        self.installed.horizontalHeader().setStretchLastSection(True)
        self.installed.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.installed.cellDoubleClicked.connect(lambda r, _c: self._use_installed(r))
        v.addWidget(self.installed)
        self.vision_only = QCheckBox("Only models that take images (a projector beside them)")
        self.vision_only.toggled.connect(lambda _on: self._filter_installed())
        v.addWidget(self.vision_only)
        self.installed.setSelectionMode(QTableWidget.SelectionMode.ExtendedSelection)
        use = QPushButton("Load selected")
        use.clicked.connect(lambda: self._use_installed(self.installed.currentRow()))
        v.addWidget(use)
        self.compare = QPushButton("Compare installed quants…")
        self.compare.setToolTip(
            "Memory, speed and quality (KL divergence, top-1 agreement, perplexity) of the "
            "selected quants, or of every installed quant of the selected model"
        )
        self.compare.clicked.connect(self.compare_quants)
        v.addWidget(self.compare)
        return w

    def quant_files(self) -> list[str]:
        """The selected rows' files; one row selected: every quant of that model."""
        rows = getattr(self, "installed_rows", [])
        picked = sorted({i.row() for i in self.installed.selectedIndexes()})
        if len(picked) == 1 and 0 <= picked[0] < len(rows):
            name = rows[picked[0]][0].name
            return [str(r[0].path) for r in rows if r[0].name == name]
        return [str(rows[i][0].path) for i in picked if 0 <= i < len(rows)]

    def compare_quants(self) -> None:
        from vllmchat.ui.models.quant_lab_dialog import QuantLabDialog

        files = self.quant_files()
        if len(files) < 2:
            self.status.setText("Select two or more quants of one model (or one of several).")
            return
        self.quant_lab = QuantLabDialog(files, self)
        self.quant_lab.show()

    def refresh_installed(self) -> None:
        self.workers.run(
            functools.partial(_installed_rows, tuple(self.folders), self.hw, self.fit_settings),
            self._fill_installed,
            self._failed,
            name="Reading the installed models",
        )

    def _fill_installed(self, rows: list[InstalledRow]) -> None:
        self.installed_rows = rows
        self.installed.setRowCount(len(rows))
        for i, (m, _kind, _text, color, message) in enumerate(rows):
            label = (m.label or "?") + (" · vision" if m.vision else "")
            cells = [m.name, label, size_text(m.size), message]
            for j, value in enumerate(cells):
                item = QTableWidgetItem(value)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if j == 3:
                    item.setForeground(Qt.GlobalColor.black)
                    item.setBackground(tint(color))
                self.installed.setItem(i, j, item)
        self.installed.resizeColumnsToContents()
        self._filter_installed()

    def show_vision_only(self, on: bool = True) -> None:
        """List only the installed models that take images (after an image was sent to
        a model without vision)."""
        self.vision_only.setChecked(on)

    def _filter_installed(self) -> None:
        only = self.vision_only.isChecked()
        for i, row in enumerate(getattr(self, "installed_rows", [])):
            self.installed.setRowHidden(i, only and not row[0].vision)

    def _use_server(self, url: str, model: str) -> None:
        self.chosen_server = (url, model)
        self.accept()

    def _use_draft(self, path: str) -> None:
        self.chosen_draft = path
        self.accept()

    def _use_installed(self, row: int) -> None:
        if 0 <= row < len(getattr(self, "installed_rows", [])):
            self.chosen_path = str(self.installed_rows[row][0].path)
            self.accept()

    def _failed(self, exc: Exception) -> None:
        self.status.setText(str(exc))

    # -- other sources -------------------------------------------------------------------
    def _use_demo(self) -> None:
        from vllmchat.core.demo_model import demo_model_path

        self.chosen_path = str(demo_model_path())
        self.accept()

    def _open_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a model", str(Path.home()), "GGUF models (*.gguf)"
        )
        if path:
            self.open_path(path)

    def open_path(self, path: str) -> bool:
        try:
            check_model_file(path)
        except EngineError as exc:
            self.status.setText(str(exc))
            return False
        self.chosen_path = path
        self.accept()
        return True

    def _downloaded(self, path: str) -> None:
        self.chosen_path = path
        self.refresh_installed()
        self.accept()

    def done(self, result: int) -> None:
        self.hub.let_go_of_downloads()  # the window's panel goes on showing the download
        if self.downloads.parent() is self:
            self.downloads.join()  # no window to carry it: stop with the dialog
        self.workers.join()
        self.drafts.field.close_workers()
        super().done(result)
