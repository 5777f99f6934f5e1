"""The Server panel as a dock of the main window: hidden until asked for (Model >
Server…), closed with the window, before the engine ends."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.snapshot import AppSnapshot
from vllmchat.ui.server.server_control import ServerControl
from vllmchat.ui.server.server_panel import ServerPanel

HEIGHT = 240  # px: the dock's first height, where the window has room


class AppHandle(Protocol):
    """What the panel uses of the window's handle on the application layer."""

    app: ChatApp
    snapshot: AppSnapshot

    def configure(self, **changes: Any) -> object: ...


class ServerDock(QDockWidget):
    """The Server panel in a dock at the window's bottom (it may float)."""

    def __init__(self, bridge: AppHandle, window: QMainWindow) -> None:
        super().__init__("Server", window)
        self.setObjectName("server-dock")
        self._sized = False
        self.bridge = bridge
        self.control = ServerControl(bridge.app, self)
        self.panel = ServerPanel(self.control, lambda: bridge.snapshot.settings, self._remember)
        scroll = QScrollArea()  # a short window keeps its height: the panel scrolls
        scroll.setWidget(self.panel)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidget(scroll)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self)
        self.hide()

    def show_panel(self) -> None:
        first = not self.isVisible() and not self._sized
        self.show()
        self.raise_()
        if first and not self.isFloating():  # room for a few rows of the log, at first
            self._sized = True
            window = self.parentWidget()
            if isinstance(window, QMainWindow):
                window.resizeDocks([self], [HEIGHT], Qt.Orientation.Vertical)

    def _remember(self, port: int, lan: bool) -> object:
        return self.bridge.configure(api_port=port, api_lan=lan)

    def close_server(self) -> None:
        """Stop the server and keep the clients' states (before the engine closes)."""
        self.panel.key.close_workers()
        self.control.close()
