"""The model picker's Hub tab: search Hugging Face, see each quant's fit here, and
download one (in the window's downloads panel, so it goes on after the picker closes)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.models.advisor import QuantAdvice
from vllmchat.core.models.catalog import QuantFile, RepoHit
from vllmchat.core.models.download import Downloader
from vllmchat.core.models.events import DownloadProgress
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings
from vllmchat.core.paths import models_dir
from vllmchat.core.resources import curated_models
from vllmchat.ui.common.workers import WorkerGroup
from vllmchat.ui.models.downloads import DownloadsPanel
from vllmchat.ui.models.fit_badge import badge, size_text, tint


def _quant_advice(
    repo: str, settings: FitSettings, hw: HardwareInfo, token: str | None
) -> list[tuple[QuantFile, QuantAdvice]]:
    """A repository's quants with their fit here (on a worker: reads the hub and the disk)."""
    from vllmchat.core.models.repo_advice import repo_quant_advice
    from vllmchat.core.tuning.quant_lab import measured_quality

    return repo_quant_advice(repo, settings, hw, token=token, quality=measured_quality())


class HubTab(QWidget):
    """Repositories (curated, or found), the quants of the one selected, a download."""

    told = Signal(str)
    """A line for the picker's status (searching, found, downloading, failed)."""
    downloaded = Signal(str)
    """A quant downloaded and verified: its file's path."""

    def __init__(
        self,
        hw: HardwareInfo,
        fit_settings: FitSettings,
        workers: WorkerGroup,
        downloads: DownloadsPanel,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.hw, self.fit_settings, self.workers = hw, fit_settings, workers
        self.downloads = downloads
        self.downloads.progress.connect(self._show_progress)
        self.downloads.finished.connect(self._downloaded)
        self.downloads.failed.connect(self._download_failed)
        self.quants: list[tuple[QuantFile, QuantAdvice]] = []
        v = QVBoxLayout(self)
        row = QHBoxLayout()
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search GGUF models on Hugging Face, or owner/repo")
        self.query.returnPressed.connect(self.search)
        go = QPushButton("Search")
        go.clicked.connect(self.search)
        row.addWidget(self.query)
        row.addWidget(go)
        v.addLayout(row)
        body = QHBoxLayout()
        self.repos = QListWidget()
        self.repos.currentItemChanged.connect(self._repo_selected)
        body.addWidget(self.repos, 2)
        self.quant_table = QTableWidget(0, 3)
        self.quant_table.setHorizontalHeaderLabels(["Quant", "Size", "Fit"])
        self.quant_table.horizontalHeader().setStretchLastSection(True)
        self.quant_table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        body.addWidget(self.quant_table, 3)
        v.addLayout(body)
        row = QHBoxLayout()
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.download_selected)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(lambda: self.downloads.cancel())
        self.cancel_button.setEnabled(False)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.speed = QLabel("")
        row.addWidget(self.download_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.bar, 1)
        row.addWidget(self.speed)
        v.addLayout(row)
        for entry in curated_models():
            if not entry.get("builtin"):
                self._add_repo(entry["repo"], f"★ {entry['title']} — {entry['notes']}")

    def _add_repo(self, repo: str, label: str) -> None:
        item = QListWidgetItem(label)
        item.setData(Qt.ItemDataRole.UserRole, repo)
        self.repos.addItem(item)

    def search(self) -> None:
        from vllmchat.core.models.catalog import search

        text = self.query.text().strip()
        if not text:
            return
        if "/" in text:
            self.repos.clear()
            self._add_repo(text, text)
            self.repos.setCurrentRow(0)
            return
        self.told.emit("Searching…")
        self.workers.run(
            functools.partial(search, text, token=os.environ.get("HF_TOKEN")),
            self._fill_repos,
            self._failed,
            name="The hub search",
        )

    def _fill_repos(self, hits: list[RepoHit]) -> None:
        self.repos.clear()
        for hit in hits:
            self._add_repo(hit.repo, f"{hit.repo}  ({hit.downloads:,} downloads)")
        self.told.emit(f"{len(hits)} repositories." if hits else "Nothing found.")

    def _repo_selected(self, item: QListWidgetItem | None, _prev: object) -> None:
        if item is None:
            return
        repo = item.data(Qt.ItemDataRole.UserRole)
        hw, s = self.hw, self.fit_settings
        self.told.emit(f"Reading {repo}…")
        self.quant_table.setRowCount(0)
        self.workers.run(
            functools.partial(_quant_advice, repo, s, hw, os.environ.get("HF_TOKEN")),
            self._fill_quants,
            self._failed,
            name=f"Reading {repo}",
        )

    def _fill_quants(self, rows: list[tuple[QuantFile, QuantAdvice]]) -> None:
        self.quants = rows
        self.quant_table.setRowCount(len(rows))
        pick = 0
        for i, (quant, advice) in enumerate(rows):
            text, color = badge(advice.fit)
            star = "★ recommended · " if advice.recommended else ""
            parts = f" ({len(quant.parts)} parts)" if quant.is_split else ""
            if quant.projector is not None:  # downloaded with it: the model takes images
                parts += f" + vision {size_text(quant.projector.size)}"
            for j, value in enumerate(
                [quant.label or quant.filename, size_text(quant.size) + parts, star + text]
            ):
                cell = QTableWidgetItem(value)
                cell.setFlags(cell.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if j == 2:
                    cell.setBackground(tint(color))
                    cell.setToolTip(advice.fit.message)
                self.quant_table.setItem(i, j, cell)
            pick = i if advice.recommended else pick
        if rows:
            self.quant_table.selectRow(pick)
        self.told.emit(f"{len(rows)} quants." if rows else "No GGUF files in this repository.")

    def download_selected(self) -> None:
        row = self.quant_table.currentRow()
        if not 0 <= row < len(self.quants):
            return
        quant = self.quants[row][0]
        self.download_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        downloader = Downloader(models_dir(), token=os.environ.get("HF_TOKEN"))
        if self.downloads.start(quant, downloader):
            self.told.emit(f"Downloading {quant.filename}… (it goes on if you close this)")
        else:
            self.told.emit("Another download is running (see the status bar).")
            self.download_button.setEnabled(True)
            self.cancel_button.setEnabled(False)

    def _show_progress(self, p: DownloadProgress) -> None:
        self.bar.setValue(int(p.fraction * 1000))
        eta = f"{p.eta_s:,.0f} s left" if p.eta_s != float("inf") else ""
        self.speed.setText(
            f"{size_text(p.done)} / {size_text(p.total)} · {p.bytes_per_s / MIB:,.1f} MiB/s · {eta}"
        )

    def _downloaded(self, path: str) -> None:
        self.download_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.told.emit(f"Downloaded and verified: {Path(path).name}")
        self.downloaded.emit(path)

    def _download_failed(self, exc: object) -> None:
        self.download_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        resume = " Press Download to resume." if "cancel" in str(exc).lower() else ""
        self.told.emit(f"{exc}{resume}")

    def _failed(self, exc: Exception) -> None:
        self.told.emit(str(exc))

    def let_go_of_downloads(self) -> None:
        """Stop following the downloads panel (it goes on showing the download)."""
        for signal, slot in (
            (self.downloads.progress, self._show_progress),
            (self.downloads.finished, self._downloaded),
            (self.downloads.failed, self._download_failed),
        ):
            signal.disconnect(slot)
