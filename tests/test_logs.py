"""The log file: failures with their tracebacks (the app's and the engine process's),
rotation shared by processes, and a folder that cannot be written."""

from __future__ import annotations

import io
import logging
import os
import re
import time
from pathlib import Path

import pytest

from tests.helpers import crash_engine
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import LoadFailed
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.machine import logs


@pytest.fixture
def log_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """This process logs to a fresh folder for one test (and its engine processes too):
    the test starts unconfigured, and what it configured is taken off after it (the
    configuration before it comes back)."""
    fresh = logs._State()
    monkeypatch.setattr(logs, "_state", fresh)
    monkeypatch.delenv(logs.FILE_ENV, raising=False)
    yield tmp_path / "log"
    os.environ.pop(logs.FILE_ENV, None)
    if fresh.handler is not None:
        logging.getLogger(logs.LOGGER).removeHandler(fresh.handler)
        fresh.handler.close()


def _wait_for(path: Path, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        content = path.read_text(encoding="utf-8") if path.exists() else ""
        if text in content or time.monotonic() > deadline:
            return content
        time.sleep(0.05)


def test_a_failed_load_is_logged_with_its_traceback_by_the_app_and_the_engine(log_folder, tmp_path):
    path = logs.configure(log_folder)
    assert path == log_folder / logs.LOG_NAME and os.environ[logs.FILE_ENV] == str(path)
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"))
    bad = tmp_path / "nonexistent.gguf"
    try:
        events = list(app.load(AppSettings.of(model_path=str(bad))))
    finally:
        app.shutdown()
        store.close()
    failed = events[-1]
    assert isinstance(failed, LoadFailed)
    text = path.read_text(encoding="utf-8")
    # The app's record: what the user was shown, and where it was raised.
    assert f"Loading {bad} failed: {failed.message}" in text
    assert "Traceback (most recent call last)" in text and "chat_app.py" in text
    # The engine process's record (its own pid) with the traceback inside the engine.
    assert "vllmchat.core.engine.process.serving.worker: Load failed:" in text
    child = text.split("Load failed:", 1)[1]
    assert "Traceback (most recent call last)" in child and "worker.py" in child
    pids = {m.group(1) for m in re.finditer(r"^\d{4}-\d\d-\d\d [\d:,]+ (\d+) ", text, re.M)}
    assert str(os.getpid()) in pids and len(pids) == 2


def test_an_engine_crash_leaves_its_python_traceback_in_the_log(log_folder):
    path = logs.configure(log_folder)
    assert path is not None
    client = EngineClient()
    client.start()
    try:
        client.memory()  # the engine is up and waiting for requests
        crash_engine(client, "segfault")
    finally:
        client.close()
    text = _wait_for(path, "Segmentation fault")
    assert "Fatal Python error: Segmentation fault" in text
    assert "worker.py" in text and "in serve" in text  # where the engine was


def test_an_unwritable_log_folder_falls_back_to_stderr_with_one_warning(log_folder, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    stderr = io.StringIO()
    assert logs.configure(blocker / "log", stderr=stderr) is None
    assert logs.configured() and logs.log_file() is None
    assert logs.configure(log_folder) is None  # once per process: the first answer stands
    warning = stderr.getvalue()
    assert warning.count("\n") == 1 and "cannot be written" in warning
    assert "stderr only" in warning and str(blocker / "log") in warning
    log = logging.getLogger("vllmchat.test")
    try:
        raise ValueError("an unexpected failure")
    except ValueError as exc:
        log.error("It failed", exc_info=exc)
        log.warning("A failure the user was shown as a message", exc_info=exc)
    assert "It failed" in stderr.getvalue() and "ValueError" in stderr.getvalue()
    assert "was shown" not in stderr.getvalue()  # stderr gets errors, not the warnings


def test_processes_sharing_the_file_rotate_it_once_and_follow_the_rotation(tmp_path):
    path = tmp_path / "shared.log"
    first, second = (
        logs.SharedRotatingFileHandler(path, maxBytes=300, backupCount=2, encoding="utf-8")
        for _ in range(2)
    )  # as two processes would hold it
    try:
        for i in range(12):
            handler = first if i % 2 else second
            handler.emit(logging.makeLogRecord({"msg": f"record {i:02d} " + "x" * 40}))
        rotated = sorted(p.name for p in tmp_path.iterdir())
        assert rotated == ["shared.log", "shared.log.1", "shared.log.2"]
        sizes = [(tmp_path / name).stat().st_size for name in rotated]
        assert all(size <= 300 for size in sizes), sizes
        assert "record 11" in path.read_text(encoding="utf-8")  # the newest is in the file
        oldest_first = [tmp_path / n for n in ("shared.log.2", "shared.log.1", "shared.log")]
        records = "".join(p.read_text(encoding="utf-8") for p in oldest_first)
        numbers = [int(m) for m in re.findall(r"record (\d+)", records)]
        assert numbers == list(range(12))  # none lost, none twice, in order
    finally:
        first.close()
        second.close()


def test_help_opens_the_log_folder(qtbot, tmp_path):
    pytest.importorskip("PySide6")
    from PySide6.QtCore import QObject, QUrl, Slot
    from PySide6.QtGui import QDesktopServices

    from vllmchat.core.paths import log_dir
    from vllmchat.ui.window.main_window import MainWindow

    class Opened(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.urls: list[QUrl] = []

        @Slot(QUrl)
        def show(self, url: QUrl) -> None:
            self.urls.append(url)

    opened = Opened()
    QDesktopServices.setUrlHandler("file", opened, "show")
    store = ConversationStore(tmp_path / "c.sqlite3")
    window = MainWindow(store, AppSettings(), KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(window)
    try:
        help_menu = next(
            a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "Help"
        )
        action = next(a for a in help_menu.actions() if a.text() == "Open log folder")
        action.trigger()
        assert [u.toLocalFile() for u in opened.urls] == [str(log_dir())]
    finally:
        QDesktopServices.unsetUrlHandler("file")
        window.close()
        store.close()
