"""The Server panel: the local API (OpenAI's, Anthropic's and Ollama's shapes) switched
on and off on the window's own model; its address, its key, access from the network,
the requests it answered, the clients' saved states, and the engine's queue, which the
window's chat and the API share.

The panel forwards what the user asks to ``ServerControl`` and shows what it signals;
a start that fails (a port taken, the network without a key) is said in the panel and
the switch goes back off.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.engine_queue import WINDOW, Holder, QueueChanged
from vllmchat.core.app.serving.service import RequestLogged
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.api_states import StatesChanged
from vllmchat.ui.common.icons import icon
from vllmchat.ui.server.key_row import KeyRow
from vllmchat.ui.server.server_control import LOOPBACK, Listening, Refused, ServerControl
from vllmchat.ui.server.server_tables import ClientStatesTable, RequestLogTable

ERROR_STYLE = "color: #c5221f;"
OFF_TEXT = "Off. Once on, other programs (IDE agents, Open WebUI, scripts) use this model."


def holder_text(holder: Holder) -> str:
    """Who holds (or waits for) the engine, in words."""
    if holder.source == WINDOW:
        return "this window's chat"
    return f"{holder.client} ({holder.label})" if holder.label else holder.client


def queue_text(queue: QueueChanged) -> str:
    running = holder_text(queue.running) if queue.running is not None else "nothing"
    return f"running: {running}, waiting: {len(queue.waiting)}"


class ServerPanel(QWidget):
    """The switch, the address, the key, LAN access, the log, the clients, the queue."""

    def __init__(
        self,
        control: ServerControl,
        settings: Callable[[], AppSettings],
        remember: Callable[[int, bool], object],
        parent: QWidget | None = None,
    ) -> None:
        """``settings``: the application's settings now; ``remember(port, lan)``: keep
        the port and LAN access that served (an intent to the application layer)."""
        super().__init__(parent)
        self.control = control
        self.settings = settings
        self.remember = remember
        self.serving: Listening | None = None
        start = settings()
        self.switch = QCheckBox("Serve this model over HTTP")
        self.switch.setToolTip("OpenAI's, Anthropic's and Ollama's APIs, for other programs")
        self.switch.setEnabled(False)  # until the key has been read
        self.switch.toggled.connect(self._switched)
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(start.api_port)
        self.port.setToolTip("The port to listen on (changed while the server is off)")
        self.port.valueChanged.connect(self._show_address)
        self.url = QLabel()
        self.url.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_url = QPushButton(icon("copy"), "Copy")
        self.copy_url.setToolTip("Copy the base URL (OpenAI's shape)")
        self.copy_url.clicked.connect(self._copy_url)
        self.lan = QCheckBox("Allow other machines on the network (needs a key)")
        self.lan.setChecked(start.api_lan)
        self.lan.toggled.connect(self._show_address)
        self.key = KeyRow()
        self.key.key_changed.connect(self._key_known)
        self.message = QLabel(OFF_TEXT)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.queue = QLabel(queue_text(control.app.engine_queue.snapshot()))
        self.queue.setWordWrap(True)
        self.log = RequestLogTable()
        self.clients = ClientStatesTable()
        self.clients_summary = QLabel(self.clients.summary())
        self._lay_out()
        control.listening.connect(self._on_listening)
        control.refused.connect(self._on_refused)
        control.stopped.connect(self._on_stopped)
        control.request_logged.connect(self._on_request)
        control.states_changed.connect(self._on_states)
        control.queue_changed.connect(self._on_queue)
        self._show_address()

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.setSpacing(6)
        top.addWidget(self.switch)
        top.addWidget(QLabel("on port"))
        top.addWidget(self.port)
        top.addStretch()
        address = QHBoxLayout()
        address.setSpacing(6)
        address.addWidget(self.url)
        address.addWidget(self.copy_url)
        address.addStretch()
        form = QFormLayout()
        form.setVerticalSpacing(3)
        form.addRow(top)
        form.addRow("Base URL", address)
        form.addRow(self.lan)
        form.addRow("Key", self.key)
        form.addRow(self.key.note)
        form.addRow("Queue", self.queue)
        form.addRow(self.message)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addLayout(form)
        left_layout.addStretch()
        left.setMinimumWidth(460)
        left.setMaximumWidth(560)
        clients = QWidget()
        c = QVBoxLayout(clients)
        c.setContentsMargins(0, 4, 0, 0)
        c.addWidget(self.clients_summary)
        c.addWidget(self.clients.table, 1)
        self.tabs = QTabWidget()
        # The tables take the height the dock has: they ask for none of their own, so
        # the panel scrolls only when its controls do not fit.
        self.tabs.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        self.tabs.setMinimumHeight(90)
        self.tabs.addTab(self.log.table, "Requests")
        self.tabs.addTab(clients, "Clients")
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 2, 6, 4)
        row.addWidget(left)
        row.addWidget(self.tabs, 1)

    # -- the switch ----------------------------------------------------------------------
    def _switched(self, on: bool) -> None:
        if on:
            self.switch.setEnabled(False)  # until it listens or is refused
            self._lock(True)
            self._say("Starting…", error=False)
            origins = tuple(self.settings().api_cors_origins)
            self.control.start(
                self.port.value(), lan=self.lan.isChecked(), key=self.key.key, origins=origins
            )
        else:
            self.switch.setEnabled(False)  # until it has stopped
            self.control.stop()

    def _on_listening(self, listening: Listening) -> None:
        self.serving = listening
        self.switch.setEnabled(True)
        self._show_address()
        self._say(
            "On, for other machines too: they send the key."
            if listening.lan
            else "On, for programs on this machine.",
            error=False,
        )
        s = self.settings()
        if (listening.address.port, listening.lan) != (s.api_port, s.api_lan):
            self.remember(listening.address.port, listening.lan)

    def _on_refused(self, refused: Refused) -> None:
        self._set_off()
        self._say(refused.message)

    def _on_stopped(self, why: str) -> None:
        self._set_off()
        self._say(why or OFF_TEXT, error=bool(why))

    def _set_off(self) -> None:
        self.serving = None
        with QSignalBlocker(self.switch):
            self.switch.setChecked(False)
        self.switch.setEnabled(self.key.known)
        self._lock(False)
        self._show_address()

    def _lock(self, locked: bool) -> None:
        """What the running server was started with stays until it stops."""
        self.port.setEnabled(not locked)
        self.lan.setEnabled(not locked)
        self.key.set_locked(locked)

    # -- what is shown ---------------------------------------------------------------------
    def base_url(self) -> str:
        port = self.serving.address.port if self.serving is not None else self.port.value()
        return f"http://{LOOPBACK}:{port}/v1"

    def _show_address(self) -> None:
        self.url.setText(self.base_url())
        lan = self.serving.lan if self.serving is not None else self.lan.isChecked()
        ollama = self.base_url().removesuffix("/v1") + "/api"
        who = (
            "Other machines use this machine's address with this port."
            if lan
            else "Only programs on this machine can connect."
        )
        self.url.setToolTip(f"OpenAI's and Anthropic's shapes; Ollama's at {ollama}. {who}")

    def _copy_url(self) -> None:
        QGuiApplication.clipboard().setText(self.base_url())

    def _key_known(self, key: str) -> None:
        if not self.switch.isChecked():
            self.switch.setEnabled(True)

    def _say(self, text: str, *, error: bool = True) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else "")

    def _on_request(self, logged: RequestLogged) -> None:
        self.log.add(logged)
        self.tabs.setTabText(0, f"Requests ({self.log.table.rowCount()})")

    def _on_states(self, states: StatesChanged) -> None:
        self.clients.show_states(states)
        self.clients_summary.setText(self.clients.summary())
        self.tabs.setTabText(1, f"Clients ({len(states.states)})")

    def _on_queue(self, _told: QueueChanged) -> None:
        # Told from several threads: the queue's own snapshot is the last word.
        queue = self.control.app.engine_queue.snapshot()
        self.queue.setText(queue_text(queue))
        self.queue.setToolTip("\n".join(f"waiting: {holder_text(h)}" for h in queue.waiting))
