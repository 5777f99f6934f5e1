"""The window's status bar: the status line (with the bar's passing messages inside it),
the busy bar of a load and the downloads panel."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QProgressBar, QStatusBar

from vllmchat.ui.models.downloads import DownloadsPanel
from vllmchat.ui.window.readouts.status_line import StatusLine


def fill_status_bar(
    bar: QStatusBar, events: Any
) -> tuple[StatusLine, QProgressBar, DownloadsPanel]:
    """Put the status line, the busy bar and the downloads panel in ``bar``."""
    status_line = StatusLine(events)  # follows loads for the identity mark
    bar.addPermanentWidget(status_line, 1)  # it takes the width: the messages go in it
    bar.messageChanged.connect(status_line.show_message)
    busy_bar = QProgressBar()
    busy_bar.setRange(0, 0)  # indeterminate while the model loads
    busy_bar.setMaximumWidth(140)
    busy_bar.hide()
    bar.addPermanentWidget(busy_bar)
    downloads = DownloadsPanel()
    bar.addPermanentWidget(downloads)
    downloads.hide()  # until a download starts
    return status_line, busy_bar, downloads
