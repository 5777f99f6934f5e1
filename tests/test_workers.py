"""The window's one worker type: values yielded in order then the return value; a
failure is an ending that carries the exception, is logged and is shown; ``quit()``
stops the work at its next step and closes it; no worker is left running."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("PySide6")

from vllmchat.core.engine.events import EngineError, ErrorEvent, ErrorKind
from vllmchat.ui.common.workers import Worker, WorkerGroup


def _record(worker: Worker) -> list[tuple[object, ...]]:
    """Every ending and value, in the order the GUI thread gets them."""
    seen: list[tuple[object, ...]] = []
    worker.yielded.connect(lambda v: seen.append(("yielded", v)))
    worker.returned.connect(lambda v: seen.append(("returned", v)))
    worker.errored.connect(lambda e: seen.append(("errored", e)))
    worker.aborted.connect(lambda: seen.append(("aborted",)))
    worker.finished.connect(lambda: seen.append(("finished",)))
    return seen


def test_a_worker_yields_in_order_on_the_gui_thread_then_returns(qtbot):
    gui = threading.current_thread()
    ran_on: list[threading.Thread] = []

    def count() -> Iterator[int]:
        ran_on.append(threading.current_thread())
        yield from range(3)
        return "three"

    errors: list[Exception] = []
    worker = Worker(count, errors.append)
    seen = _record(worker)
    on_gui: list[bool] = []
    worker.yielded.connect(lambda _v: on_gui.append(threading.current_thread() is gui))
    with qtbot.waitSignal(worker.finished):
        worker.start()
    assert seen == [
        ("yielded", 0),
        ("yielded", 1),
        ("yielded", 2),
        ("returned", "three"),
        ("finished",),
    ]
    assert ran_on and ran_on[0] is not gui and on_gui == [True, True, True]
    assert not errors and not worker.running
    with pytest.raises(RuntimeError, match="runs once"):
        worker.start()


def test_a_plain_function_returns_its_value_even_an_iterable_one(qtbot):
    worker = Worker(lambda: [1, 2], lambda _e: None)
    seen = _record(worker)
    with qtbot.waitSignal(worker.finished):
        worker.start()
    assert seen == [("returned", [1, 2]), ("finished",)]


def test_a_failure_handler_is_required():
    with pytest.raises(TypeError):
        Worker(lambda: 1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="failure handler"):
        Worker(lambda: 1, None)  # type: ignore[arg-type]


def test_a_failure_ends_the_worker_with_the_exception_and_a_log_line(qtbot, caplog):
    # An EngineError is a RuntimeError: superqt's worker would only warn about it.
    boom = EngineError(ErrorKind.INTERNAL, "the engine broke")

    def fails() -> Iterator[int]:
        yield 1
        raise boom

    errors: list[Exception] = []
    worker = Worker(fails, errors.append, name="Breaking")
    seen = _record(worker)
    with qtbot.waitSignal(worker.finished):
        worker.start()
    assert errors == [boom]
    assert seen == [("yielded", 1), ("errored", boom), ("finished",)]
    assert "Breaking failed: the engine broke" in caplog.text


def test_quit_stops_the_work_at_its_next_step_and_closes_it(qtbot):
    steps: list[int] = []
    waiting, go_on, closed = threading.Event(), threading.Event(), threading.Event()

    def slow() -> Iterator[int]:
        try:
            for i in range(100):
                steps.append(i)
                yield i
                waiting.set()
                go_on.wait(10)  # the step in flight when quit() is asked
        finally:
            closed.set()

    worker = Worker(slow, lambda _e: None)
    seen = _record(worker)
    worker.start()
    assert waiting.wait(10)
    worker.quit()
    with qtbot.waitSignal(worker.finished):
        go_on.set()
    assert steps == [0, 1], "the step in flight ends at its yield; no step after it"
    assert closed.is_set(), "the generator was closed (its finally ran)"
    assert seen == [("yielded", 0), ("yielded", 1), ("aborted",), ("finished",)]


def test_a_worker_asked_to_quit_before_it_runs_never_calls_its_work(qtbot):
    called: list[bool] = []
    worker = Worker(lambda: called.append(True), lambda _e: None)
    seen = _record(worker)
    worker.quit()
    with qtbot.waitSignal(worker.finished):
        worker.start()
    assert not called and seen == [("aborted",), ("finished",)]


def test_a_group_quits_and_waits_for_its_workers_and_none_is_left_running(qtbot):
    group = WorkerGroup()
    release = threading.Event()

    def forever() -> Iterator[None]:
        while True:
            yield release.wait(0.01)

    worker = group.run(forever, lambda _r: None, lambda _e: None, name="Forever")
    assert group.busy and worker in Worker.running_workers()
    with qtbot.waitSignal(worker.aborted):
        assert group.join(5000)
    assert not group.busy and worker not in Worker.running_workers()


def test_workers_waiting_for_a_busy_pool_can_be_skipped_and_end_aborted(qtbot):
    from PySide6.QtCore import QThreadPool

    pool = QThreadPool()
    pool.setMaxThreadCount(1)  # as the engine's: one call at a time, in order
    group = WorkerGroup(pool=pool)
    running, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def first() -> str:
        running.set()
        release.wait(10)
        return "first"

    one = group.run(first, ran.append, lambda _e: None)
    two = group.run(lambda: ran.append("second"), lambda _r: None, lambda _e: None)
    assert running.wait(10) and two.queued and not one.queued
    group.skip_queued()
    with qtbot.waitSignal(two.aborted):
        release.set()
    qtbot.waitUntil(lambda: not group.busy)
    assert ran == ["first"], "the running call ended as usual; the queued one never ran"
    assert pool.waitForDone(5000)


def test_a_failed_call_on_the_engine_thread_is_shown_by_the_window(qtbot, tmp_path):
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.store.store import ConversationStore
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache
    from vllmchat.ui.window.main_window import MainWindow

    store = ConversationStore(tmp_path / "c.sqlite3")
    w = MainWindow(store, AppSettings(), KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(w)

    def broken() -> Iterator[object]:
        yield from ()
        raise ValueError("something unexpected")

    with qtbot.waitSignal(w.bridge.events.turn_failed) as failed:
        w.bridge.call(broken)
    event = failed.args[0]
    assert isinstance(event, ErrorEvent) and event.kind == ErrorKind.INTERNAL
    assert w.last_turn is event
    assert "Broken failed: ValueError('something unexpected')" in w.statusBar().currentMessage()
    assert w.input.send.isEnabled()
    w.close()
    assert not w.bridge.busy
    store.close()


def test_the_quant_lab_shows_a_failed_comparison_and_can_start_again(qtbot, tmp_path):
    from vllmchat.ui.models.quant_lab_dialog import QuantLabDialog

    missing = [str(tmp_path / "M-Q8_0.gguf"), str(tmp_path / "M-Q4_K_M.gguf")]
    dialog = QuantLabDialog(missing)
    qtbot.addWidget(dialog)
    dialog.start()
    assert not dialog.start_button.isEnabled()
    qtbot.waitUntil(dialog.start_button.isEnabled, timeout=30_000)  # on any ending
    assert dialog.status.text().startswith("The comparison failed:")
    assert "M-Q8_0.gguf" in dialog.status.text()
    assert dialog.start_button.isEnabled() and not dialog.stop_button.isEnabled()
    dialog.close()
