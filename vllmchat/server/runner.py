"""The server on its own thread and event loop, in the app's process: started,
stopped, and asked where it listens."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from dataclasses import dataclass

import uvicorn

from vllmchat.core.app.serving.service import ApiService
from vllmchat.server.app import build_app
from vllmchat.server.door import DoorPolicy, allowed_hosts
from vllmchat.server.turn_stream import end_turns_of

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerAddress:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class ServerStartFailed(RuntimeError):
    """The server could not listen (the port is taken, the address is not this machine's)."""


def lan_needs_key(host: str, key: str) -> None:
    """Refuse to listen beyond loopback without a key."""
    if host not in ("127.0.0.1", "localhost", "::1") and not key:
        raise ServerStartFailed(
            f"Listening on {host} lets other machines in: set an API key first."
        )


class ApiServer:
    """``ApiServer(service, host, port, key=...).start()``; ``stop()`` ends it."""

    def __init__(
        self,
        service: ApiService,
        host: str = "127.0.0.1",
        port: int = 1234,
        *,
        key: str = "",
        origins: tuple[str, ...] = (),
        extra_hosts: tuple[str, ...] = (),
        body_timeout_s: float = 30.0,
    ) -> None:
        lan_needs_key(host, key)
        self.service = service
        self.policy = DoorPolicy(
            allowed_hosts(host, extra_hosts), origins, key, body_timeout_s=body_timeout_s
        )
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def address(self) -> ServerAddress:
        return ServerAddress(self.host, self.port)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ServerAddress:
        """Listen now (``ServerStartFailed`` when the port is taken), serve on a thread."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise ServerStartFailed(
                f"Cannot listen on {self.host}:{self.port}: {exc.strerror or exc}. "
                "Choose another port."
            ) from exc
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self._socket = sock
        config = uvicorn.Config(
            build_app(self.service, self.policy),
            log_level="warning",
            access_log=False,
            timeout_keep_alive=30,
            lifespan="off",
            ws="none",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="vllmchat-api", daemon=True)
        self._thread.start()
        return self.address

    def _serve(self) -> None:
        assert self._server is not None and self._socket is not None
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except Exception as exc:  # logged; the window shows the server as stopped
            _log.error("The API server stopped", exc_info=exc)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop listening and end open streams (their turns stop, or leave the queue)."""
        end_turns_of(self.service)
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._socket is not None:
            self._socket.close()
        self._thread = self._server = self._socket = None
