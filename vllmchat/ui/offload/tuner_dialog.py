"""The tuner window: start, progress with ETA, stop, the chart and table, Apply, export."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.models.memory import MIB
from vllmchat.core.tuning.events import PointMeasured, TuneFinished, TuneStarted
from vllmchat.core.tuning.results import TunePoint, TuneResult
from vllmchat.ui.offload.tuning_chart import TuningChart, write_csv

HEADERS = (
    "GPU layers",
    "threads",
    "prompt threads",
    "ubatch",
    "prefill tok/s",
    "decode tok/s",
    "VRAM (measured)",
    "VRAM (estimate)",
    "RAM",
    "note",
)


def _mib(value: int | None) -> str:
    return f"{value / MIB:,.0f} MiB" if value else "–"


class TunerDialog(QDialog):
    """Measures configurations through the application layer; emits what to do."""

    start_requested = Signal(float, bool)
    """Tune with this budget (seconds); True: measure again even if cached."""
    stop_requested = Signal()
    apply_requested = Signal(object)
    """``TuneConfig`` to reload with."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Tune speed and memory")
        self.resize(860, 720)
        self.tune_result: TuneResult | None = None
        self.points: list[TunePoint] = []
        self.budget = QDoubleSpinBox()
        self.budget.setRange(10, 1800)
        self.budget.setValue(60)
        self.budget.setSuffix(" s budget")
        self.start_button = QPushButton("Measure")
        self.start_button.setAccessibleName("Start measuring")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setFormat("%v of %m points")
        self.eta = QLabel("GPU layers, CPU threads and ubatch are measured on this machine.")
        self.chart = TuningChart()
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.pick = QLabel("")
        self.pick.setWordWrap(True)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setEnabled(False)
        self.png_button = QPushButton("Export PNG…")
        self.csv_button = QPushButton("Export CSV…")
        top = QHBoxLayout()
        for w in (self.budget, self.start_button, self.stop_button, self.progress):
            top.addWidget(w)
        bottom = QHBoxLayout()
        bottom.addWidget(self.pick, 1)
        for w in (self.png_button, self.csv_button, self.apply_button):
            bottom.addWidget(w)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.eta)
        layout.addWidget(self.chart, 3)
        layout.addWidget(self.table, 2)
        layout.addLayout(bottom)
        self.start_button.clicked.connect(self._start)
        self.stop_button.clicked.connect(self.stop_requested)
        self.apply_button.clicked.connect(self._apply)
        self.png_button.clicked.connect(self._export_png)
        self.csv_button.clicked.connect(self._export_csv)

    def _start(self) -> None:
        self.points.clear()
        self.table.setRowCount(0)
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.apply_button.setEnabled(False)
        self.start_requested.emit(self.budget.value(), False)

    def _apply(self) -> None:
        if self.tune_result is not None and self.tune_result.pick is not None:
            self.apply_requested.emit(self.tune_result.pick)

    # -- events from the application layer ------------------------------------------------
    def on_started(self, event: TuneStarted) -> None:
        self.progress.setRange(0, max(1, event.planned))
        self.progress.setValue(0)
        self.eta.setText(f"Measuring on {event.device} within {event.budget_s:.0f} s…")

    def on_point(self, event: PointMeasured) -> None:
        self.points.append(event.point)
        self.progress.setRange(0, event.planned)
        self.progress.setValue(event.done)
        self.eta.setText(
            f"{event.point.config.label()}: "
            + (f"{event.point.decode_tok_s:.1f} tok/s" if event.point.fits else event.point.note)
            + f" · about {event.eta_s:.0f} s left"
        )
        self._add_row(event.point)
        self.chart.show_points(self.points)

    def on_finished(self, event: TuneFinished) -> None:
        self.show_result(event.result)

    def show_result(self, result: TuneResult) -> None:
        self.tune_result = result
        self.points = list(result.points)
        self.table.setRowCount(0)
        for p in result.points:
            self._add_row(p)
        self.chart.show_points(result.points, result.memory_limit)
        if result.pick is not None:
            self.chart.mark_pick(result.pick)
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.progress.setRange(0, max(1, len(result.points)))
        self.progress.setValue(len(result.points))
        done = "Stopped" if result.stopped else "Done"
        self.eta.setText(f"{done}: {len(result.points)} points in {result.seconds:.0f} s.")
        if result.pick is not None:
            self.pick.setText(f"<b>Pick:</b> {result.pick.label()} — {result.reason}")
        else:
            self.pick.setText(result.reason)
        self.apply_button.setEnabled(result.pick is not None)

    def show_unavailable(self, message: str) -> None:
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(False)
        self.eta.setText(message)

    def _add_row(self, p: TunePoint) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        c = p.config
        cells = (
            c.placement.n_gpu_layers,
            c.n_threads,
            c.n_threads_batch,
            c.n_ubatch,
            f"{p.prefill_tok_s:.1f}" if p.fits else "–",
            f"{p.decode_tok_s:.1f}" if p.fits else "–",
            _mib(p.vram),
            _mib(p.estimate_vram),
            _mib(p.ram),
            p.note,
        )
        for col, value in enumerate(cells):
            self.table.setItem(row, col, QTableWidgetItem(str(value)))

    def _export_png(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export chart", "tuning.png", "PNG (*.png)")
        if path:
            self.chart.save_png(path)

    def _export_csv(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export points", "tuning.csv", "CSV (*.csv)")
        if path:
            write_csv(path, self.points)
