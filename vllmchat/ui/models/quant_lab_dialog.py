"""Compare installed quants of one model: a table and a chart of quality against size."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

import pyqtgraph as pg
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.models.memory import MIB
from vllmchat.core.tuning.events import QuantEvent, QuantProgress, QuantsCompared
from vllmchat.core.tuning.results import QuantRow
from vllmchat.ui.common.workers import Worker

HEADERS = (
    "quant",
    "size",
    "mean KLD",
    "top-1 agreement",
    "perplexity",
    "prefill tok/s",
    "decode tok/s",
    "note",
)


def measure(files: Sequence[str], should_stop: Callable[[], bool]) -> Iterator[QuantEvent]:
    """The comparison in its own engine process (the chat's engine keeps its model)."""
    from vllmchat.core.app.engines import work_engine
    from vllmchat.core.tuning.quant_lab import compare

    engine = work_engine()
    try:
        yield from compare(engine, files, should_stop=should_stop)
    finally:
        engine.close()


class QuantLabDialog(QDialog):
    """Runs the quant lab on a worker; Stop ends it after the file being measured (the
    rows so far are shown, and cached for the quant advice like every row)."""

    def __init__(self, files: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare installed quants")
        self.resize(820, 620)
        self.files = list(files)
        self.status = QLabel(f"{len(self.files)} files; the most precise one is the reference.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels(HEADERS)
        pg.setConfigOptions(antialias=True, background="w", foreground="k")
        self.chart = pg.PlotWidget(title="Quality against size")
        self.chart.setLabel("left", "mean KLD vs the reference")
        self.chart.setLabel("bottom", "file size (MiB)")
        self.start_button = QPushButton("Compare")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        layout = QVBoxLayout(self)
        for w in (self.status, self.table, self.chart, self.start_button, self.stop_button):
            layout.addWidget(w)
        self.worker: Worker | None = None
        self._stop = threading.Event()  # compare's own flag, checked between files
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)

    def start(self) -> None:
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self._stop.clear()
        files, stop = self.files, self._stop
        worker = Worker(
            lambda: measure(files, lambda: stop.is_set() or worker.abort_requested),
            self._failed,
            name="The comparison of quants",
        )
        worker.yielded.connect(self._on_event)
        worker.finished.connect(self._ended)
        self.worker = worker.start()

    def stop(self) -> None:
        """End after the file being measured (an engine call is not cut short); the rows
        measured so far are shown."""
        self._stop.set()
        self.stop_button.setEnabled(False)
        self.status.setText("Stopping after the file being measured…")

    def _on_event(self, event: QuantEvent) -> None:
        if isinstance(event, QuantProgress):
            self._on_progress(event)
        else:
            self.show_rows(event)

    def _failed(self, exc: Exception) -> None:
        self.status.setText(f"The comparison failed: {exc}")

    def _ended(self) -> None:
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        if self._stop.is_set():
            self.status.setText(
                f"Stopped after {self.table.rowCount()} file(s). " + self.status.text()
            )

    def _on_progress(self, event: QuantProgress) -> None:
        self.status.setText(f"Measuring {event.current} ({event.done + 1} of {event.total})…")

    def show_rows(self, done: QuantsCompared) -> None:
        self.table.setRowCount(0)
        for row in done.rows:
            self._add_row(row)
        ok = [r for r in done.rows if not r.error]
        self.chart.clear()
        if ok:
            self.chart.plot(
                [r.size / MIB for r in ok],
                [r.kld_mean for r in ok],
                pen=None,
                symbol="o",
                symbolBrush="#1f77b4",
            )
            for r in ok:
                label = pg.TextItem(r.label, anchor=(0, 1), color="k")
                label.setPos(r.size / MIB, r.kld_mean)
                self.chart.addItem(label)
        self.status.setText(
            f"Reference: {done.reference}. Lower KLD and higher top-1 agreement "
            "mean closer to the reference's answers."
        )

    def _add_row(self, r: QuantRow) -> None:
        n = self.table.rowCount()
        self.table.insertRow(n)
        cells = (
            r.label,
            f"{r.size / MIB:,.0f} MiB",
            "reference" if r.reference else f"{r.kld_mean:.4f}",
            f"{r.top1_agreement * 100:.1f}%",
            f"{r.perplexity:.3f}",
            f"{r.prefill_tok_s:.0f}",
            f"{r.decode_tok_s:.1f}",
            r.error,
        )
        for col, value in enumerate(cells):
            self.table.setItem(n, col, QTableWidgetItem(value))

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.worker is not None:  # ends after the file being measured, with its engine
            self.worker.quit()
            self.worker.wait(60_000)
        super().closeEvent(event)
