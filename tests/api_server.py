"""A real API server on loopback for the tests: the demo model loaded in a real engine,
the app on a fresh store, the server on an ephemeral port."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllmchat.core.app.events import Loaded
from vllmchat.core.app.serving.service import ApiService
from vllmchat.core.app.start import Started, open_app
from vllmchat.core.app_settings import AppSettings
from vllmchat.server.runner import ApiServer


@dataclass
class Served:
    started: Started
    service: ApiService
    server: ApiServer
    folder: Path

    @property
    def url(self) -> str:
        return self.server.address.url

    @property
    def pid(self) -> int | None:
        return self.started.app.engine.pid


@contextmanager
def serving(
    model: Path,
    *,
    engine: Any = None,
    folder: Path | None = None,
    key: str = "",
    origins: tuple[str, ...] = (),
    **settings: Any,
) -> Iterator[Served]:
    """The demo model served until the block ends (its states kept in ``folder``)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="vllmchat-api-"))
    flat = {"model_path": str(model), "n_threads": 2, "temperature": 0.0, "n_ctx": 4096, **settings}
    started = open_app(AppSettings.of(**flat), engine=engine, file=folder / "c.sqlite3")
    assert isinstance(started, Started), started
    app = started.app
    loaded = [e for e in app.load(app.settings, remember=False) if isinstance(e, Loaded)]
    assert loaded, "the model did not load"
    service = ApiService(app, states_root=folder / "states")
    server = ApiServer(service, "127.0.0.1", 0, key=key, origins=origins)
    server.start()
    try:
        yield Served(started, service, server, folder)
    finally:
        server.stop()
        service.close()
        started.close()
