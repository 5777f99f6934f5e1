"""The window and the application layer's settings: the offload panel follows announced
changes without echo, shows the application layer's estimate of each placement (made
once), asks before a placement past the estimate's bound, and an aborting placement
from the slider comes back at the last one that ran (no banner)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QMessageBox

from tests.helpers import crash_engine
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.models.advisor import check_fit
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo
from vllmchat.core.models.memory import estimate
from vllmchat.core.placement import Placement

TIMEOUT = 60_000
GIB = 1 << 30


class AbortsAt(EngineClient):
    """The real engine, made to abort (SIGABRT in its process) when asked to load at
    ``layers`` GPU layers: what a GPU allocation past the card does (no GPU here)."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = layers

    def load(self, settings):
        if settings.placement.n_gpu_layers == self.layers:
            crash_engine(self, "abort")
        return super().load(settings)

    def reload(self, settings):
        if settings.placement.n_gpu_layers == self.layers:
            crash_engine(self, "abort")
        return super().reload(settings)


@pytest.fixture
def make_window(qtbot, tmp_path: Path, demo_model: Path):
    """``make(engine=None, estimator=None) -> MainWindow``: the demo loaded (greedy, short
    replies) by an application layer that estimates placements with ``estimator``."""
    from vllmchat.ui.window.main_window import MainWindow

    made = []

    def make(engine=None, estimator=None):
        store = ConversationStore(tmp_path / "c.sqlite3")
        settings = AppSettings.of(
            model_path=str(demo_model),
            n_ctx=1024,
            n_threads=2,
            max_tokens=12,
            temperature=0.0,
            speculation="off",
        )
        kv = KVStateCache(tmp_path / "kv")
        w = MainWindow(ChatApp(store, kv, settings, engine=engine, estimator=estimator))
        made.append((w, store))
        qtbot.addWidget(w)
        w.show()
        with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
            w.start()
        assert w.desc is not None
        return w

    yield make
    for w, store in made:
        w.close()
        assert not w.bridge.snapshot.alive, "the engine process was left running"
        store.close()


def _gpu_fitting(w, layers: int) -> HardwareInfo:
    """A GPU on which ``layers`` GPU layers just fit (plain data: no GPU here)."""
    fit = w.loads.fit()
    need = estimate(w.desc, fit.with_placement(Placement(n_gpu_layers=layers))).vram
    more = estimate(w.desc, fit.with_placement(Placement(n_gpu_layers=layers + 1))).vram
    free = int((need + (more - need) / 2) / 0.92)
    return HardwareInfo(32 * GIB, 32 * GIB, [GpuInfo("Test GPU", free, free, "test")], True)


def _pretend_gpu(w, hw: HardwareInfo) -> None:
    """The machine a reload finds is ``hw`` (plain data: no GPU here), for the
    application layer's estimates and for the panel."""
    w.bridge.app.room = hw
    w.offload.set_model(w.desc, hw, w.loads.fit())


def _answer(box: QMessageBox, button: QMessageBox.StandardButton) -> None:
    box.button(button).click()


def test_the_panel_follows_announced_placements_and_asks_past_the_bound(qtbot, make_window):
    w = make_window()
    with pytest.raises(AttributeError):
        w.settings = w.settings.with_changes(n_ctx=2048)  # the window holds no copy
    # A change made elsewhere (not by the slider) is announced; the panel follows it
    # without asking for it again.
    ended = []
    w.loads.load_ended.connect(ended.append)
    announced = []
    w.bridge.events.settings_changed.connect(announced.append)  # on the engine's thread
    with (
        qtbot.assertNotEmitted(w.offload.placement_requested, wait=500),
        qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT),
    ):
        w.bridge.set_placement(Placement(n_gpu_layers=3))
    assert [e.settings.load.placement.n_gpu_layers for e in announced] == [3]
    assert w.settings.load.placement.n_gpu_layers == 3 and w.settings is announced[0].settings
    assert w.offload.slider.value() == 3 and len(ended) == 1
    # Past the estimate's bound the slider is marked, and a release asks first.
    _pretend_gpu(w, _gpu_fitting(w, 5))
    assert w.offload.tick_marks.bound == 6 and w.offload.slider.isEnabled()
    w.offload.slider.setValue(8)  # keyboard-like: the request goes out after a pause
    qtbot.waitUntil(lambda: w.models.confirmation is not None, timeout=5000)
    box = w.models.confirmation
    assert box.isVisible() and "Load 8 GPU layers anyway?" in box.text()
    assert "Does not fit" in box.text()
    _answer(box, QMessageBox.StandardButton.No)
    assert w.offload.slider.value() == 3 and len(ended) == 1  # back to what runs, no load
    w.offload.slider.setValue(8)
    qtbot.waitUntil(lambda: w.models.confirmation is not None, timeout=5000)
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
        _answer(w.models.confirmation, QMessageBox.StandardButton.Yes)
    assert w.settings.load.placement.n_gpu_layers == 8 and w.offload.slider.value() == 8


def test_moving_the_slider_runs_the_estimate_once_and_the_panel_shows_its_event(qtbot, make_window):
    calls = []

    def counting(desc, hw, s):
        calls.append((threading.current_thread() is threading.main_thread(), s.placement))
        return check_fit(desc, hw, s)

    w = make_window(estimator=counting)
    proposals = []
    w.bridge.events.placement_proposed.connect(proposals.append)
    _pretend_gpu(w, _gpu_fitting(w, 20))
    assert proposals and proposals[-1].placement == Placement()  # what runs, estimated
    assert w.offload.tick_marks.bound == 21  # the bounds came with it
    calls.clear()
    w.offload.slider.setValue(4)  # keyboard-like: the reload goes out after a pause
    assert calls == [(True, Placement(n_gpu_layers=4))], "one estimate, on the GUI thread"
    shown = proposals[-1]
    assert shown.placement == Placement(n_gpu_layers=4) and w.offload.proposal is shown
    assert shown.fit is not None and shown.fit.message in w.offload.estimate.text()
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT) as ended:
        pass  # the release's reload: the application layer takes the estimate it made
    assert w.settings.load.placement == Placement(n_gpu_layers=4), ended.args
    assert all(on_gui for on_gui, _ in calls), "no second estimate on the engine's thread"


def test_an_aborting_placement_from_the_slider(qtbot, make_window, tmp_path):
    w = make_window(AbortsAt(5))
    with qtbot.waitSignal(w.turn_ended, timeout=TIMEOUT):
        w.send(  # long enough for the conversation's KV state to be checkpointed
            "I am planning a week of walking in the mountains in late spring and would like "
            "advice on what to pack, how to plan each day and what to do if the weather turns."
        )
    # Written on the engine's own thread; a real abort comes after the model is let go
    # of, which waits for it (this one comes before the reload is asked for).
    qtbot.waitUntil(lambda: any((tmp_path / "kv").glob("*/conversation-*.kv")), timeout=10_000)
    _pretend_gpu(w, _gpu_fitting(w, 20))  # well within the bound
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
        w.offload.slider.setValue(5)  # the engine aborts there
    assert w.models.confirmation is None  # within the bound: not asked
    assert "aborted" in w.notice.text() and "at 5 GPU layers." in w.notice.text()
    assert "runs again at 0 GPU layers, the last placement that ran" in w.notice.text()
    assert not w.banner.isVisible() and w.bridge.snapshot.alive
    assert w.settings.load.placement.n_gpu_layers == 0 and w.offload.slider.value() == 0
    with qtbot.waitSignal(w.turn_ended, timeout=TIMEOUT):
        w.send("And three lakes?")
    assert w.last_turn.stats.tokens_reused > 0, "the conversation's KV state came back"
    assert [m.role for m in w.stored.branch(w.conversation_id)] == ["user", "assistant"] * 2
