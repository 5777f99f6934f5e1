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

    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.kv_cache import KVStateCache
    from vllmchat.core.conversations.store import ConversationStore
    from vllmchat.core.demo_model import gemma_model_path
    from vllmchat.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    store = ConversationStore(folder / "c.sqlite3")
    settings = AppSettings.of(
        model_path=str(gemma_model_path()),
        n_ctx=2048,
        n_threads=2,
        max_tokens=160,
        temperature=0.7,
        seed=5,
    )
    window = MainWindow(store, settings, KVStateCache(folder / "kv"), save_settings=False)
    window.show()
    beat = _Heartbeat()

    def wait(predicate: Any, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.001)

    window.start()
    wait(lambda: window.loads_ended == 1 and window.desc is not None)
    beat.timer.start()
    streaming = []
    for text in ("Tell me a story about a fox.", "And then what happened?"):
        n = window.turns_ended
        t0 = time.perf_counter()
        window.send(text)
        wait(lambda n=n: window.turns_ended > n)
        t1 = time.perf_counter()
        streaming.append(beat.max_gap_ms(t0, t1))
        tokens = window.last_turn.stats.decode_tokens
    reloads = []
    for layers in (1, 0):
        n = window.loads_ended
        t0 = time.perf_counter()
        window.set_gpu_layers(layers)
        wait(lambda n=n: window.loads_ended > n)
        wait(lambda: False, 0.3)  # the estimate refresh after the reload
        reloads.append(beat.max_gap_ms(t0, time.perf_counter()))
    beat.timer.stop()
    window.close()
    store.close()
    return {
        "stall_streaming_ms": round(max(streaming), 1),
        "stall_reload_ms": round(max(reloads), 1),
        "max_stall_ms": round(max(streaming + reloads), 1),
        "streamed_tokens_last_turn": tokens,
    }


def run() -> dict[str, Any]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("DATA", "CONFIG", "KV"):
            os.environ[f"VLLMCHAT_{name}_DIR"] = str(Path(tmp) / name.lower())
        result = _stalls(Path(tmp))
        startups = [_startup_s() for _ in range(3)]
    result["startup_s"] = round(statistics.median(startups), 3)
    return result
