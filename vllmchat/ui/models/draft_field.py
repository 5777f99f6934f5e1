"""The draft model setting: installed models with the model's vocabulary to pick
from, the others greyed with the reason, and the catalog's and the hub's matches on
request (all found off the GUI thread). Settings → Draft model shows it as a field,
the model picker as its Draft models tab (``DraftTab``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.models.drafts import (
    DraftCandidate,
    file_refusal,
    hub_drafts,
    installed_draft_options,
)
from vllmchat.core.models.local import discover
from vllmchat.ui.common.workers import WorkerGroup

NONE = ""
MIB = 2**20


def row_text(c: DraftCandidate) -> str:
    """A candidate as the list shows it: what it is, and whether and why not."""
    size = f"{c.size / MIB:,.0f} MiB"
    if c.source != "installed":
        where = "in the catalog" if c.source == "catalog" else "on the hub"
        return f"↓ {c.repo} · {c.filename} — {size}, {where}, same vocabulary"
    if c.usable:
        return f"✓ {c.name} — {size}, installed, same vocabulary"
    return f"✗ {c.name} — {size}, {c.reason}"


class DraftField(QWidget):
    """An editable list of draft model paths ('' is none) and, below it, every candidate
    with whether it can draft for the model (a click on one that can picks it)."""

    def __init__(
        self,
        model_path: str,
        current: str,
        parent: QWidget | None = None,
        *,
        folders: Sequence[str] = (),
    ) -> None:
        """``folders``: where to look for models besides the usual places."""
        super().__init__(parent)
        self.model_path = model_path
        self.folders = tuple(folders)
        self.combo = QComboBox()
        self.combo.setEditable(True)
        self.combo.addItem(NONE)
        if current:
            self.combo.addItem(current)
        self.combo.setCurrentText(current)
        self.combo.setPlaceholderText("none")
        self.hub_button = QPushButton("Find on the hub")
        self.hub_button.setToolTip(
            "Reads the headers of the catalog's models and the hub's small quants of this family"
        )
        self.hub_button.clicked.connect(self.find_on_hub)
        self.choices = QListWidget()
        self.choices.setMaximumHeight(110)
        self.choices.setWordWrap(True)
        self.choices.itemClicked.connect(self._pick)
        self.choices.hide()
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
        outer.addWidget(self.choices)
        outer.addWidget(self.found)
        self.workers = WorkerGroup(self)
        self.hub: list[DraftCandidate] = []
        self.installed: list[DraftCandidate] | None = None  # those that can draft
        self.refused: list[DraftCandidate] = []  # installed, with the reason
        self.refusal = ""  # why the draft model set cannot draft for the model
        if os.path.isfile(model_path):
            self.found.setText("Looking for installed models with this vocabulary…")
            self.workers.run(
                functools.partial(self._look, model_path, current, tuple(self.folders)),
                self._show_installed,
                self._failed,
                name="Looking for installed draft models",
            )
        else:
            self.hub_button.setEnabled(False)

    @staticmethod
    def _look(model: str, current: str, folders: Sequence[str]) -> tuple[list[DraftCandidate], str]:
        """The installed candidates, and why the draft model set is refused ('' if not)."""
        refusal = file_refusal(current, model) if current else ""
        return installed_draft_options(model, discover(folders)), refusal

    def _add_row(self, c: DraftCandidate) -> None:
        item = QListWidgetItem(row_text(c))
        item.setToolTip(c.describe() + (f"\nNot offered: {c.reason}." if c.reason else ""))
        item.setData(Qt.ItemDataRole.UserRole, c.path if c.usable else "")
        if not c.usable:
            item.setFlags(Qt.ItemFlag.NoItemFlags)  # greyed: shown with why, not offered
        elif not c.path:
            item.setFlags(Qt.ItemFlag.ItemIsEnabled)  # on the hub: download it first
        self.choices.addItem(item)
        self.choices.show()

    def _pick(self, item: QListWidgetItem) -> None:
        path = item.data(Qt.ItemDataRole.UserRole)
        if path:
            self.combo.setCurrentText(path)

    def _show_installed(self, looked: tuple[list[DraftCandidate], str]) -> None:
        options, refusal = looked
        found = [c for c in options if c.usable]
        self.installed, self.refused = found, [c for c in options if not c.usable]
        current = self.combo.currentText()
        for c in found:
            if self.combo.findText(c.path) < 0:
                self.combo.addItem(c.path)
                tip = Qt.ItemDataRole.ToolTipRole
                self.combo.setItemData(self.combo.count() - 1, row_text(c), tip)
        self.combo.setCurrentText(current)
        for c in options:
            self._add_row(c)
        text = (
            f"{len(found)} installed model(s) share this model's vocabulary."
            if found
            else "No installed model shares this model's vocabulary."
        )
        self.refusal = refusal
        if refusal:
            name = os.path.basename(current)
            text = f"The draft model set ({name}) cannot draft for this model: {refusal}. " + text
        self.found.setText(text)

    def find_on_hub(self) -> None:
        self.hub_button.setEnabled(False)
        self.found.setText("Reading the catalog's and the hub's headers…")
        self.workers.run(
            functools.partial(hub_drafts, self.model_path),
            self._show_hub,
            self._failed,
            name="Looking for draft models on the hub",
        )

    def _show_hub(self, found: list[DraftCandidate]) -> None:
        self.hub = found
        self.hub_button.setEnabled(True)
        if not found:
            self.found.setText(
                "Neither the catalog nor the hub has a smaller model with this vocabulary."
            )
            return
        for c in found:
            self._add_row(c)
        self.found.setText(
            f"{len(found)} on the hub (↓): download one from Models, then pick it here."
        )

    def _failed(self, exc: Exception) -> None:
        self.hub_button.setEnabled(True)
        self.found.setText(f"Could not look for draft models: {exc}")

    def close_workers(self) -> None:
        self.workers.join()


class DraftTab(QWidget):
    """The model picker's Draft models tab: the same list as Settings → Draft model,
    for the model loaded now; ``chosen`` is set when one is picked for speculation."""

    chosen = Signal(str)
    """The draft model's path ('' for none)."""

    def __init__(
        self,
        model_path: str,
        current: str,
        folders: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        loaded = bool(model_path) and os.path.isfile(model_path)
        about = QLabel(
            f"Draft models for {os.path.basename(model_path)}: a smaller model with its "
            "vocabulary guesses tokens that the model checks in one batch."
            if loaded
            else "Load a model first: draft models are matched to the model loaded."
        )
        about.setWordWrap(True)
        self.field = DraftField(model_path, current, self, folders=folders)
        self.use = QPushButton("Use for speculation")
        self.use.setEnabled(loaded)
        self.use.clicked.connect(lambda: self.chosen.emit(self.field.combo.currentText()))
        layout = QVBoxLayout(self)
        layout.addWidget(about)
        layout.addWidget(self.field)
        layout.addStretch()
        layout.addWidget(self.use)
