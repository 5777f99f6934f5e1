"""A banner across the window when the engine process dies."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class EngineBanner(QFrame):
    """The reason, and Restart / Restart with fewer GPU layers."""

    restart_requested = Signal()
    restart_fewer_layers_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("engine-banner")
        self.setStyleSheet("#engine-banner { background: #fbe3e4; border: 1px solid #d9534f; }")
        layout = QHBoxLayout(self)
        self.label = QLabel()
        self.label.setWordWrap(True)
        layout.addWidget(self.label, 1)
        self.restart = QPushButton("Restart")
        self.restart.clicked.connect(self.restart_requested)
        self.fewer = QPushButton("Restart with fewer GPU layers")
        self.fewer.clicked.connect(self.restart_fewer_layers_requested)
        layout.addWidget(self.restart)
        layout.addWidget(self.fewer)
        self.hide()

    def show_reason(self, message: str, *, fewer_layers_possible: bool) -> None:
        self.label.setText(f"<b>The model stopped.</b> {message} Your conversation is kept.")
        self.fewer.setEnabled(fewer_layers_possible)
        self.show()
