"""The window's local API server: one ``ApiService`` on the window's ``ChatApp`` for the
window's life, an ``ApiServer`` started and stopped off the GUI thread, and what the
service and the engine's queue tell from their threads, as signals on the GUI thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.engine_queue import API
from vllmchat.core.app.serving.service import ApiService
from vllmchat.server.runner import ApiServer, ServerAddress, ServerStartFailed, lan_needs_key
from vllmchat.ui.common.workers import WorkerGroup

LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"


@dataclass(frozen=True)
class Listening:
    """The server answers at ``address`` (on every interface when ``lan``)."""

    address: ServerAddress
    lan: bool

    @property
    def base_url(self) -> str:
        """The OpenAI base URL a client on this machine uses."""
        return f"http://{LOOPBACK}:{self.address.port}/v1"


@dataclass(frozen=True)
class Refused:
    """The server did not start: ``message`` says why, in the user's words."""

    message: str


def _listen(
    service: ApiService,
    host: str,
    port: int,
    key: str,
    origins: tuple[str, ...],
    bound: list[ApiServer],
) -> ApiServer | Refused:
    """Make the server and listen (on a worker: a LAN address names this machine through
    DNS); a refusal is a value, not a failure. A server that listens joins ``bound``."""
    try:
        server = ApiServer(service, host, port, key=key, origins=origins)
        server.start()
    except ServerStartFailed as exc:
        return Refused(str(exc))
    bound.append(server)
    return server


class ServerControl(QObject):
    """Starts and stops the API server on ``app``; its ``ApiService`` is made at the
    first start and kept until ``close``."""

    listening = Signal(object)
    """``Listening``: the server answers."""
    refused = Signal(object)
    """``Refused``: the server did not start (the port is taken, LAN without a key)."""
    stopped = Signal(str)
    """The server stopped: "" when asked to, else why."""
    request_logged = Signal(object)
    """``RequestLogged`` from the service (told on a server thread)."""
    states_changed = Signal(object)
    """``StatesChanged``: the clients' saved KV states (told on a turn's thread)."""
    queue_changed = Signal(object)
    """``QueueChanged`` of the engine's one queue (told on whichever thread joined it)."""

    def __init__(self, app: ChatApp, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.app = app
        self.workers = WorkerGroup(self)
        self.service: ApiService | None = None
        self.server: ApiServer | None = None
        self.busy = False  # a start or a stop runs on a worker
        self._bound: list[ApiServer] = []  # listening, until stopped (joined on a worker)
        self._closed = False
        self._unsubscribe: list[Callable[[], None]] = [
            app.engine_queue.changes.subscribe(self.queue_changed.emit)
        ]
        unsubscribers = self._unsubscribe  # not self: a deleted control is not called
        self.destroyed.connect(lambda *_: [unsubscribe() for unsubscribe in unsubscribers])
        self._watch = QTimer(self)  # a server thread that ended by itself
        self._watch.setInterval(1000)
        self._watch.timeout.connect(self._check_alive)

    @property
    def running(self) -> bool:
        return self.server is not None

    def _service(self) -> ApiService:
        if self.service is None:
            self.service = ApiService(self.app)
            self._unsubscribe += [
                self.service.log.subscribe(self.request_logged.emit),
                self.service.states_changed.subscribe(self.states_changed.emit),
            ]
        return self.service

    # -- start and stop ----------------------------------------------------------------
    def start(self, port: int, *, lan: bool, key: str, origins: tuple[str, ...] = ()) -> None:
        """Listen on ``port`` (loopback, or every interface with ``lan``); ``listening``
        or ``refused`` follows."""
        if self.busy or self.server is not None or self._closed:
            return
        host = ALL_INTERFACES if lan else LOOPBACK
        try:
            lan_needs_key(host, key)
        except ServerStartFailed as exc:
            self.refused.emit(Refused(str(exc)))
            return
        self.busy = True
        work = functools.partial(_listen, self._service(), host, port, key, origins, self._bound)
        self.workers.run(
            work, functools.partial(self._on_listen, lan), self._on_failed, name="Starting"
        )

    def _on_listen(self, lan: bool, result: ApiServer | Refused) -> None:
        self.busy = False
        if isinstance(result, Refused):
            self.refused.emit(result)
            return
        if self._closed:  # stopped by ``close``
            return
        self.server = result
        self._watch.start()
        self.listening.emit(Listening(result.address, lan))

    def _on_failed(self, exc: Exception) -> None:
        self.busy = False
        self.refused.emit(Refused(f"The server did not start: {exc}"))

    def stop(self) -> None:
        """Stop listening (on a worker: open streams are ended); ``stopped`` follows."""
        server, self.server = self.server, None
        if server is None:
            return
        self._watch.stop()
        self._bound.remove(server)
        self.busy = True
        self.workers.run(server.stop, self._on_stopped, self._on_stop_failed, name="Stopping")

    def _on_stopped(self, _result: object) -> None:
        self.busy = False
        self.stopped.emit("")

    def _on_stop_failed(self, exc: Exception) -> None:
        self.busy = False
        self.stopped.emit(f"The server did not stop cleanly: {exc}")

    def _check_alive(self) -> None:
        if self.server is not None and not self.server.running:
            self._bound.remove(self.server)
            self.server = None
            self._watch.stop()
            self.stopped.emit("The server stopped by itself: the log folder says why.")

    # -- the window closes -------------------------------------------------------------
    def close(self) -> None:
        """Stop the server, keep the clients' states, stop listening (before the engine
        ends: the states are saved from its process)."""
        if self._closed:
            return
        self._closed = True
        self._watch.stop()
        self.workers.join()
        for server in self._bound:  # the one running, or one bound as the window closed
            server.stop()
        self._bound.clear()
        self.server = None
        if self.service is not None:
            running = self.app.engine_queue.snapshot().running
            if running is not None and running.source == API:
                self.service.stop(running)  # its client is gone: the queue frees within a token
            elif running is not None:
                self.app.stop()  # the window's reply ends within a token, kept
            self.service.close()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()  # the same list the ``destroyed`` hook holds
