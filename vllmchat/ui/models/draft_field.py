"""The draft model setting: installed models with the model's vocabulary to pick
from, and the hub's matches on request (both found off the GUI thread)."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from vllmchat.core.models.drafts import DraftCandidate, hub_drafts, installed_drafts
from vllmchat.core.models.local import discover
from vllmchat.ui.common.workers import WorkerGroup

NONE = ""


class DraftField(QWidget):
    """An editable list of draft model paths ('' is none) and what the hub offers."""

    def __init__(self, model_path: str, current: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_path = model_path
        self.combo = QComboBox()
        self.combo.setEditable(True)
        self.combo.addItem(NONE)
        if current:
            self.combo.addItem(current)
        self.combo.setCurrentText(current)
        self.combo.setPlaceholderText("none")
        self.hub_button = QPushButton("Find on the hub")
        self.hub_button.setToolTip("Reads the headers of the hub's small quants of this family")
        self.hub_button.clicked.connect(self.find_on_hub)
        self.found = QLabel("")
        self.found.setWordWrap(True)
        self.found.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.combo, 1)
        row.addWidget(self.hub_button)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addLayout(row)
        outer.addWidget(self.found)
        self.workers = WorkerGroup(self)
        self.hub: list[DraftCandidate] = []
        self.installed: list[DraftCandidate] | None = None
        if os.path.isfile(model_path):
            self.found.setText("Looking for installed models with this vocabulary…")
            self.workers.run(lambda: installed_drafts(model_path, discover()),
                             self._show_installed, self._failed,
                             name="Looking for installed draft models")  # fmt: skip
        else:
            self.hub_button.setEnabled(False)

    def _show_installed(self, found: list[DraftCandidate]) -> None:
        self.installed = found
        current = self.combo.currentText()
        for c in found:
            if self.combo.findText(c.path) < 0:
                self.combo.addItem(c.path)
                tip = Qt.ItemDataRole.ToolTipRole
                self.combo.setItemData(self.combo.count() - 1, c.describe(), tip)
        self.combo.setCurrentText(current)
        self.found.setText(
            f"{len(found)} installed model(s) share this model's vocabulary."
            if found else "No installed model shares this model's vocabulary."
        )  # fmt: skip

    def find_on_hub(self) -> None:
        self.hub_button.setEnabled(False)
        self.found.setText("Reading the hub's headers…")
        path = self.model_path
        self.workers.run(lambda: hub_drafts(path), self._show_hub, self._failed,
                         name="Looking for draft models on the hub")  # fmt: skip

    def _show_hub(self, found: list[DraftCandidate]) -> None:
        self.hub = found
        self.hub_button.setEnabled(True)
        if not found:
            self.found.setText("The hub has no smaller model with this vocabulary.")
            return
        lines = [f"{c.repo} · {c.filename} ({c.size / 2**20:,.0f} MiB)" for c in found]
        self.found.setText("On the hub (download one from Models, then pick it here):\n"
                           + "\n".join(lines))  # fmt: skip

    def _failed(self, exc: Exception) -> None:
        self.hub_button.setEnabled(True)
        self.found.setText(f"Could not look for draft models: {exc}")

    def close_workers(self) -> None:
        self.workers.join()
