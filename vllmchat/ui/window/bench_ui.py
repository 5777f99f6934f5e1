"""``vllmchat bench ui``: GUI-thread stalls while streaming and reloading; startup time."""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _startup_s() -> float:
    """Launch (a new Python process) to the main window shown."""
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllmchat", "--exit-after-show"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("window shown"):
            elapsed = time.perf_counter() - t0
            proc.wait(30)
            return elapsed
    proc.wait(30)
    raise RuntimeError("the window was never shown")


class _Heartbeat:
    """A 5 ms timer on the GUI thread; the longest gap between its ticks is the stall."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        self.ticks.append(time.perf_counter())

    def max_gap_ms(self, start: float, end: float) -> float:
        inside = [t for t in self.ticks if start <= t <= end]
        if len(inside) < 2:
            return float("inf")
        return max(b - a for a, b in itertools.pairwise(inside)) * 1000


def _stalls(folder: Path) -> dict[str, Any]:
    from PySide6.QtWidgets import QApplication

    from vllmchat.core.app.start import open_storage
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.demo_model import gemma_model_path
    from vllmchat.core.engine.events import DoneEvent
    from vllmchat.core.placement import Placement
    from vllmchat.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    storage = _storage(open_storage(file=folder / "c.sqlite3", kv_folder=folder / "kv"))
    settings = AppSettings.of(
        model_path=str(gemma_model_path()),
        n_ctx=2048,
        n_threads=2,
        max_tokens=160,
        temperature=0.7,
        seed=5,
    )
    window = MainWindow(storage.app(settings))
    window.show()
    beat = _Heartbeat()
    ended: list[Any] = []
    window.turn_ended.connect(ended.append)
    loaded: list[Any] = []
    window.loads.load_ended.connect(loaded.append)

    def wait(predicate: Any, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.001)

    window.start()
    wait(lambda: bool(loaded) and window.desc is not None)
    beat.timer.start()
    streaming = []
    for text in ("Tell me a story about a fox.", "And then what happened?"):
        n = len(ended)
        t0 = time.perf_counter()
        window.send(text)
        wait(lambda n=n: len(ended) > n)
        t1 = time.perf_counter()
        streaming.append(beat.max_gap_ms(t0, t1))
        turn = window.last_turn
        if not isinstance(turn, DoneEvent):
            raise RuntimeError(f"The benchmark's turn failed: {turn}")
        tokens = turn.stats.decode_tokens
    reloads = []
    for layers in (1, 0):
        n = len(loaded)
        t0 = time.perf_counter()
        window.bridge.set_placement(Placement(n_gpu_layers=layers))
        wait(lambda n=n: len(loaded) > n)
        wait(lambda: False, 0.3)  # the estimate refresh after the reload
        reloads.append(beat.max_gap_ms(t0, time.perf_counter()))
    beat.timer.stop()
    window.close()
    storage.close()
    return {
        "stall_streaming_ms": round(max(streaming), 1),
        "stall_reload_ms": round(max(reloads), 1),
        "max_stall_ms": round(max(streaming + reloads), 1),
        "streamed_tokens_last_turn": tokens,
    }


REPLY = (
    "Here is a short answer with a list:\n\n- one point\n- another point\n\n"
    "```python\nprint('hello')\n```\n"
)


def _storage(opened: Any) -> Any:
    """The benchmark's own conversations (a failure to open them ends it, said why)."""
    from vllmchat.core.app.start import CannotStart

    if isinstance(opened, CannotStart):
        raise RuntimeError(opened.message)
    return opened


def _long_conversation(store: Any, n: int) -> int:
    conv = store.create(title=f"{n} messages")
    parent = None
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Question {i}: how does this work?" if role == "user" else REPLY
        parent = store.add_message(conv.id, role, text, parent_id=parent).id
    return int(conv.id)


def _token_cost_ms(app: Any, n: int, tokens: int = 300) -> float:
    """Mean GUI time per streamed token (append, layout, paint) with ``n`` messages open."""
    from vllmchat.ui.chat.chat_view import ChatView, HistoryItem

    view = ChatView()
    view.resize(900, 700)
    view.show()
    items = [
        HistoryItem("user", f"Question {i}", i + 1)
        if i % 2 == 0
        else HistoryItem("assistant", REPLY, i + 1)
        for i in range(n)
    ]
    view.set_history(items)
    for _ in range(20):
        app.processEvents()
    view.start_reply()
    t0 = time.perf_counter()
    for i in range(tokens):
        view.append_token(f" word{i}")
        view.viewport().repaint()
        app.processEvents()
    cost = (time.perf_counter() - t0) / tokens * 1000
    view.close()
    view.deleteLater()
    app.processEvents()
    return cost


def _history(folder: Path) -> dict[str, Any]:
    """Opening a stored 5,000-message conversation (window painted), and the per-token
    cost of streaming under 5,000 messages against under 10."""
    from PySide6.QtWidgets import QApplication

    from vllmchat.core.app.start import open_storage
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.ui.window.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    storage = _storage(open_storage(file=folder / "long.sqlite3", kv_folder=folder / "kv-long"))
    big = _long_conversation(storage.store, 5000)  # the scene: written as a turn would
    small = storage.store.create(title="empty").id
    window = MainWindow(storage.app(AppSettings()))
    window.show()
    window.open_conversation(small)
    app.processEvents()
    t0 = time.perf_counter()
    window.open_conversation(big)
    app.processEvents()
    window.repaint()
    open_s = time.perf_counter() - t0
    window.close()
    storage.close()
    costs = {n: statistics.median(_token_cost_ms(app, n) for _ in range(3)) for n in (10, 5000)}
    return {
        "open_5000_s": round(open_s, 3),
        "token_cost_ms_10": round(costs[10], 3),
        "token_cost_ms_5000": round(costs[5000], 3),
        "token_cost_ratio_5000_vs_10": round(costs[5000] / costs[10], 3),
    }


def run() -> dict[str, Any]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("DATA", "CONFIG", "KV"):
            os.environ[f"VLLMCHAT_{name}_DIR"] = str(Path(tmp) / name.lower())
        result = _stalls(Path(tmp))
        result.update(_history(Path(tmp)))
        startups = [_startup_s() for _ in range(3)]
    result["startup_s"] = round(statistics.median(startups), 3)
    return result
