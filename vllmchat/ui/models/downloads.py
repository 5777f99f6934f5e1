"""Downloads that outlive the model picker: progress and Cancel in the status bar, and
Load when the file is in place and verified."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from vllmchat.core.models.catalog import QuantFile
from vllmchat.core.models.download import Downloader
from vllmchat.core.models.events import DownloadProgress
from vllmchat.core.models.memory import MIB
from vllmchat.ui.common.workers import WorkerGroup


class DownloadsPanel(QWidget):
    """One download at a time, on a worker thread; hidden when there is none."""

    progress = Signal(object)
    """``DownloadProgress``."""
    finished = Signal(str)
    """The path of the verified file."""
    failed = Signal(str)
    load_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workers = WorkerGroup(self)
        self.cancel_flag = threading.Event()
        self.active = False
        self.path = ""
        self.label = QLabel("")
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setMaximumWidth(160)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAccessibleName("Cancel the download")
        self.load_button = QPushButton("Load")
        self.load_button.setAccessibleName("Load the downloaded model")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (self.label, self.bar, self.cancel_button, self.load_button):
            row.addWidget(w)
        self.cancel_button.clicked.connect(self.cancel)
        self.load_button.clicked.connect(lambda: self.load_requested.emit(self.path))
        self.progress.connect(self._on_progress)
        self.hide()

    def start(self, quant: QuantFile, downloader: Downloader) -> bool:
        """Download ``quant``; False when another download is running."""
        if self.active:
            return False
        self.active = True
        self.cancel_flag.clear()
        self.label.setText(f"Downloading {quant.filename}…")
        self.bar.setValue(0)
        self.bar.show()
        self.cancel_button.show()
        self.load_button.hide()
        self.show()
        self.workers.run(
            functools.partial(
                downloader.download, quant, on_progress=self.progress.emit, cancel=self.cancel_flag
            ),
            self._done,
            self._failed,
            name="The download",
        )
        return True

    def cancel(self) -> None:
        self.cancel_flag.set()

    def join(self) -> None:
        """Cancel and wait (the window is closing); the bytes on disk resume next time."""
        self.cancel_flag.set()
        self.workers.join()

    def _on_progress(self, p: DownloadProgress) -> None:
        self.bar.setValue(int(p.fraction * 1000))
        eta = f" · {p.eta_s:,.0f} s left" if p.eta_s != float("inf") else ""
        self.label.setText(f"{p.filename}: {p.bytes_per_s / MIB:,.1f} MiB/s{eta}")

    def _done(self, path: Path) -> None:
        self.active = False
        self.path = str(path)
        self.label.setText(f"Downloaded and verified: {path.name}")
        self.bar.hide()
        self.cancel_button.hide()
        self.load_button.show()
        self.finished.emit(str(path))

    def _failed(self, exc: Exception) -> None:
        self.active = False
        resume = " Download it again to resume." if "cancel" in str(exc).lower() else ""
        self.label.setText(f"{exc}{resume}")
        self.bar.hide()
        self.cancel_button.hide()
        self.failed.emit(str(exc))
