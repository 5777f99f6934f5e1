"""The voice's models on offer (Whisper, Piper voices), each installed or downloaded
from here with its progress; a download stopped (Cancel, the dialog closed, the
connection dropped) keeps its bytes and resumes the next time."""

from __future__ import annotations

import functools
import threading

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.voice.downloads import (
    VoiceDownloadFailed,
    VoiceDownloads,
    VoiceDownloadStarted,
    VoiceModelOffer,
    VoiceModelReady,
)
from vllmchat.core.models.events import DownloadProgress
from vllmchat.ui.common.workers import Worker, WorkerGroup

_MB = 1_000_000


def offer_text(offer: VoiceModelOffer) -> str:
    """One line of the list: what it is, and whether it is here."""
    if offer.installed:
        return f"{offer.model.describe()}: installed"
    if offer.partial_bytes:
        kept = offer.partial_bytes / _MB
        return f"{offer.model.describe()}: {kept:,.0f} MB kept, resumes"
    return offer.model.describe()


class ModelDownloads(QWidget):
    """The list of models on offer, Download and Cancel, and the download's progress."""

    model_ready = Signal(object)
    """``VoiceModelReady``: a model is in place (a voice to pick, or the Whisper model)."""

    def __init__(self, downloads: VoiceDownloads | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.downloads = downloads or VoiceDownloads()
        self.jobs = WorkerGroup(self)
        self.worker: Worker | None = None
        self._cancel = threading.Event()
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        self.list = QListWidget()
        self.list.setMaximumHeight(130)
        column.addWidget(self.list)
        row = QHBoxLayout()
        self.download = QPushButton("Download")
        self.cancel = QPushButton("Cancel download")
        self.cancel.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.hide()
        for w in (self.download, self.cancel):
            row.addWidget(w)
        row.addWidget(self.progress, 1)
        column.addLayout(row)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        column.addWidget(self.status)
        self.download.clicked.connect(self.start)
        self.cancel.clicked.connect(self.stop)
        self.list.currentItemChanged.connect(self._picked)
        self.refresh()

    def refresh(self) -> None:
        """List the offers again (installed, kept bytes), keeping the one picked."""
        picked = self.picked_name()
        self.list.clear()
        for offer in self.downloads.offers():
            item = QListWidgetItem(offer_text(offer))
            item.setData(Qt.ItemDataRole.UserRole, offer.model.name)
            item.setData(Qt.ItemDataRole.UserRole + 1, offer.installed)
            self.list.addItem(item)
            if offer.model.name == picked or (picked is None and not offer.installed):
                picked = offer.model.name
                self.list.setCurrentItem(item)
        self._picked()

    def picked_name(self) -> str | None:
        item = self.list.currentItem()
        return None if item is None else str(item.data(Qt.ItemDataRole.UserRole))

    def pick(self, name: str) -> None:
        for row in range(self.list.count()):
            if self.list.item(row).data(Qt.ItemDataRole.UserRole) == name:
                self.list.setCurrentRow(row)

    def _picked(self, *_: object) -> None:
        item = self.list.currentItem()
        installed = item is None or bool(item.data(Qt.ItemDataRole.UserRole + 1))
        self.download.setEnabled(self.worker is None and not installed)

    @property
    def busy(self) -> bool:
        return self.worker is not None

    def start(self) -> None:
        """Download the model picked (off the GUI thread)."""
        name = self.picked_name()
        if name is None or self.worker is not None:
            return
        self._cancel = threading.Event()
        work = functools.partial(self.downloads.download, name, cancel=self._cancel)
        worker = Worker(work, self._failed, name="Voice model download")
        worker.yielded.connect(self._on_event)
        worker.finished.connect(self._on_finished)
        self.worker = worker
        self.download.setEnabled(False)
        self.cancel.setEnabled(True)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.status.setText(f"Asking the hub for {name}…")
        self.jobs.start(worker)

    def stop(self) -> None:
        """Stop the download; its bytes are kept for the next time."""
        self._cancel.set()

    def _on_event(self, event: object) -> None:
        if isinstance(event, VoiceDownloadStarted):
            self.progress.setRange(0, 1000)
            self.status.setText(f"Downloading {event.name} ({event.total / _MB:,.0f} MB)…")
        elif isinstance(event, DownloadProgress):
            self.progress.setValue(round(event.fraction * 1000))
            self.progress.setFormat(f"{event.done / _MB:,.1f} of {event.total / _MB:,.1f} MB")
        elif isinstance(event, VoiceModelReady):
            self.status.setText(f"{event.name} is ready.")
            self.model_ready.emit(event)
        elif isinstance(event, VoiceDownloadFailed):
            self.status.setText(event.message)

    def _failed(self, exc: Exception) -> None:
        self.status.setText(f"The download failed: {exc}")

    def _on_finished(self) -> None:
        self.worker = None
        self.cancel.setEnabled(False)
        self.progress.hide()
        self.refresh()

    def close_downloads(self) -> None:
        """The dialog closes: a download under way stops at its next block (and resumes
        next time); a connection that hangs is not waited for long."""
        self._cancel.set()
        self.jobs.wait(2_000)
