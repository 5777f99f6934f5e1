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
    body_timeout_s: float = 30.0,
    **settings: Any,
) -> Iterator[Served]:
    """``model`` served until the block ends (its clients' states kept in ``folder``)."""
    folder = folder or Path(tempfile.mkdtemp(prefix="vllmchat-api-"))
    flat = {"model_path": str(model), "n_threads": 2, "temperature": 0.0, "n_ctx": 4096, **settings}
    started = open_app(
        AppSettings.of(**flat),
        engine=engine,
        file=folder / "c.sqlite3",
        kv_folder=folder / "states",
    )
    assert isinstance(started, Started), started
    app = started.app
    loaded = [e for e in app.load(app.settings, remember=False) if isinstance(e, Loaded)]
    assert loaded, "the model did not load"
    service = ApiService(app)
    server = ApiServer(
        service, "127.0.0.1", 0, key=key, origins=origins, body_timeout_s=body_timeout_s
    )
    server.start()
    try:
        yield Served(started, service, server, folder)
    finally:
        server.stop()
        service.close()
        started.close()


def post(
    url: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    """A raw POST (stdlib): status, headers, body text."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def post_json(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    import json

    status, _, text = post(
        url, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
    )
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text
