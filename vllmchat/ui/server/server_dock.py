"""The Server panel as a dock of the main window: hidden until asked for (Model >
Server…), closed with the window, before the engine ends."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.snapshot import AppSnapshot
from vllmchat.ui.server.server_control import ServerControl
from vllmchat.ui.server.server_panel import ServerPanel


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
        self.bridge = bridge
        self.control = ServerControl(bridge.app, self)
        self.panel = ServerPanel(self.control, lambda: bridge.snapshot.settings, self._remember)
        self.setWidget(self.panel)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self)
        self.hide()

    def show_panel(self) -> None:
        self.show()
        self.raise_()

    def _remember(self, port: int, lan: bool) -> object:
        return self.bridge.configure(api_port=port, api_lan=lan)

    def close_server(self) -> None:
        """Stop the server and keep the clients' states (before the engine closes)."""
        self.panel.key.close_workers()
        self.control.close()
