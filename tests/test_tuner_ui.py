"""The tuner window alone (chart, table, Apply, PNG and CSV export), the measured marks
on the slider, and a real sweep through the application layer."""

from __future__ import annotations

import csv

import pyqtgraph as pg
import pytest

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import Loaded
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, ErrorEvent
from vllmchat.core.placement import Placement
from vllmchat.core.tuning.events import PointMeasured, TuneFinished, TuneStarted
from vllmchat.core.tuning.results import TuneConfig, TunePoint, TuneResult

MIB = 1 << 20


def _result() -> TuneResult:
    fitting = [
        TunePoint(
            TuneConfig(Placement(n_gpu_layers=n), 8, 8, 512),
            True,
            prefill_tok_s=800 + 100 * n,
            decode_tok_s=8 + n,
            vram=(700 + 160 * n) * MIB,
            estimate_vram=(705 + 160 * n) * MIB,
            ram=(5000 - 150 * n) * MIB,
        )
        for n in (0, 8, 16, 24, 27)
    ]
    failed = TunePoint(
        TuneConfig(Placement(n_gpu_layers=29), 8, 8, 512), False, note="does not fit: out of memory"
    )
    points = (*fitting, failed)
    return TuneResult(
        points,
        TuneConfig(Placement(n_gpu_layers=27), 16, 15, 512),
        "35.0 tok/s decode",
        42.0,
        budget_s=60,
        memory_limit=4986 * MIB,
        device="GPU",
    )


def test_the_tuner_window_draws_lists_applies_and_exports(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    from vllmchat.ui.offload.tuner_dialog import TunerDialog

    dialog = TunerDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    result = _result()
    dialog.on_started(TuneStarted(8, 60.0, "GPU"))
    dialog.on_point(PointMeasured(result.points[0], 1, 8, 3.0, 21.0))
    assert dialog.table.rowCount() == 1 and "21 s left" in dialog.eta.text()
    dialog.on_finished(TuneFinished(result))
    assert dialog.table.rowCount() == len(result.points)
    assert dialog.table.item(5, 9).text().startswith("does not fit")
    decode = dialog.chart.speed.getPlotItem().listDataItems()
    prompt = dialog.chart.prompt.getPlotItem().listDataItems()
    assert len(decode) == len(prompt) == 2  # every point, and the curve through them
    assert list(decode[-1].getData()[0]) == [0, 8, 16, 24, 27]
    assert list(decode[-1].getData()[1]) == [8, 16, 24, 32, 35]
    assert "27 GPU layers" in dialog.pick.text() and dialog.apply_button.isEnabled()
    with qtbot.waitSignal(dialog.apply_requested) as applied:
        dialog.apply_button.click()
    assert applied.args == [result.pick]
    png, table = tmp_path / "t.png", tmp_path / "t.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(png), ""))
    dialog.png_button.click()
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(table), ""))
    dialog.csv_button.click()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 6 and rows[-1]["fits"] == "False" and rows[0]["vram_mib"] == "700.0"


def test_measured_marks_appear_on_the_slider(qtbot):
    from vllmchat.ui.offload.offload_panel import OffloadPanel

    panel = OffloadPanel()
    qtbot.addWidget(panel)
    panel.show_tuning(_result())
    assert "<b>27: 35</b>" in panel.marks.text() and "0: 8" in panel.marks.text()
    marks = panel.tick_marks
    assert marks.marks == {0: 8.0, 8: 16.0, 16: 24.0, 24: 32.0, 27: 35.0} and marks.pick == 27
    panel.resize(320, 200)
    panel.show()
    image = marks.grab().toImage()
    x = int(marks.x_of(27))
    assert image.pixelColor(x, image.height() - 2).name() == "#9467bd", "the pick's tick"


@pytest.fixture
def app(make_demo_app):
    chat, loaded = make_demo_app(n_ctx=1024, max_tokens=8)
    assert loaded
    return chat


def test_tuning_through_the_app_keeps_the_conversation_and_applies_live(app):
    question = "Name a colour, a fruit, a tree, a river, a mountain and a bird. " * 3
    assert any(isinstance(e, DoneEvent) for e in app.send(question))
    before = app.engine.kv().kv_tokens
    assert before > 64  # long enough to be saved rather than re-read
    events = list(app.tuning.tune(5.0, fresh=True, should_stop=lambda: False))
    finished = [e for e in events if isinstance(e, TuneFinished)]
    assert finished and finished[0].result.pick is not None
    assert any(isinstance(e, Loaded) for e in events), "the model is loaded back"
    assert app.engine.kv().kv_tokens == before, "with the conversation's KV state"
    pick = finished[0].result.pick
    applied = [e for e in app.tuning.apply_tune(pick) if isinstance(e, Loaded)]
    assert applied and applied[0].reload is not None and applied[0].reload.restored
    assert app.settings.load.n_threads == pick.n_threads
    cached = list(app.tuning.tune(5.0, should_stop=lambda: False))
    assert [type(e).__name__ for e in cached][:2] == ["TuneStarted", "TuneFinished"]


def test_tuning_a_server_model_says_why_it_does_not_apply(tmp_path):
    from vllmchat.core.engine.protocol import Capabilities

    class ServerEngine:  # any engine that does not measure itself
        alive = True
        info = None
        capabilities = Capabilities()

    store = ConversationStore(tmp_path / "c.sqlite3")
    chat = ChatApp(store, KVStateCache(tmp_path / "kv"), engine=ServerEngine())  # type: ignore[arg-type]
    events = list(chat.tuning.tune(5.0, should_stop=lambda: False))
    assert isinstance(events[0], ErrorEvent) and "server owns its memory" in events[0].message
    store.close()


def test_the_quant_lab_window_shows_rows_and_a_chart(qtbot):
    from vllmchat.core.tuning.events import QuantsCompared
    from vllmchat.core.tuning.results import QuantRow
    from vllmchat.ui.models.quant_lab_dialog import QuantLabDialog

    rows = (
        QuantRow("/m/M-F16.gguf", "F16", 270 * MIB, True, 19.9, 0.0, 0.0, 1.0, 400, 30),
        QuantRow("/m/M-Q8_0.gguf", "Q8_0", 145 * MIB, False, 20.1, 0.004, 0.02, 0.96, 500, 60),
        QuantRow("/m/M-Q4_K_M.gguf", "Q4_K_M", 105 * MIB, False, 21.3, 0.05, 0.3, 0.84, 600, 90),
    )
    dialog = QuantLabDialog([r.path for r in rows])
    qtbot.addWidget(dialog)
    dialog.show_rows(QuantsCompared(rows, rows[0].path))
    assert dialog.table.rowCount() == 3 and dialog.table.item(0, 2).text() == "reference"
    assert dialog.table.item(2, 3).text() == "84.0%"
    assert len(dialog.chart.getPlotItem().listDataItems()) == 1


def test_the_picker_compares_every_installed_quant_of_the_selected_model(qtbot, tmp_path):
    from vllmchat.core.models.hardware import quick_probe
    from vllmchat.core.models.memory import FitSettings
    from vllmchat.ui.models.model_picker import ModelPicker

    picker = ModelPicker(quick_probe(), FitSettings())
    qtbot.addWidget(picker)
    qtbot.waitUntil(lambda: hasattr(picker, "installed_rows"), timeout=20000)
    picker.workers.join()

    class Model:
        def __init__(self, name: str, path: str) -> None:
            self.name, self.path = name, path

    rows = [
        (Model("M", "/m/M-Q8_0.gguf"),),
        (Model("M", "/m/M-Q4_K_M.gguf"),),
        (Model("N", "/m/N-Q4_K_M.gguf"),),
    ]
    picker.installed_rows = rows
    picker.installed.setRowCount(3)
    picker.installed.selectRow(0)
    assert picker.quant_files() == ["/m/M-Q8_0.gguf", "/m/M-Q4_K_M.gguf"]


def test_on_a_cpu_the_chart_plots_what_was_varied_and_every_point(qtbot):
    from vllmchat.ui.offload.tuning_chart import TuningChart

    chart = TuningChart()
    qtbot.addWidget(chart)
    points = [
        TunePoint(
            TuneConfig(Placement(n_gpu_layers=0), t, t, 512),
            True,
            prefill_tok_s=100.0 * t,
            decode_tok_s=speed,
            ram=300 * MIB,
        )
        for t, speed in ((1, 43.6), (2, 79.7))
    ]
    chart.show_points(points, limit=23_000 * MIB)
    chart.mark_pick(TuneConfig(Placement(n_gpu_layers=0), 2, 2, 512))
    assert chart.axis_label == "CPU threads"
    assert chart.memory.getPlotItem().titleLabel.text == "Engine RAM"
    decode = chart.speed.getPlotItem().listDataItems()
    assert sorted(decode[-1].getData()[1]) == [43.6, 79.7]  # both points, not one
    lines = [i for i in chart.speed.getPlotItem().items if isinstance(i, pg.InfiniteLine)]
    assert [line.value() for line in lines] == [2]  # the pick at 2 threads
    memory_lines = [i for i in chart.memory.getPlotItem().items if isinstance(i, pg.InfiniteLine)]
    assert memory_lines == [] or all(line.angle == 90 for line in memory_lines)  # no RAM line
    moe = [
        TunePoint(
            TuneConfig(Placement(n_gpu_layers=49, n_cpu_moe=k), 16, 16, 512),
            True,
            decode_tok_s=50.0 - k / 2,
            vram=(9000 - 300 * k) * MIB,
        )
        for k in (33, 35, 40)
    ]
    chart.show_points(moe, limit=8000 * MIB)
    assert chart.axis_label.startswith("experts of layers in RAM")
    assert list(chart.speed.getPlotItem().listDataItems()[-1].getData()[0]) == [33, 35, 40]
