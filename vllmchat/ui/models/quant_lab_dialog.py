"""Compare installed quants of one model: a table and a chart of quality against size."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal
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
from vllmchat.core.tuning.quant_lab import QuantProgress, QuantRow, QuantsCompared

HEADERS = ("quant", "size", "mean KLD", "top-1 agreement", "perplexity", "prefill tok/s",
           "decode tok/s", "note")  # fmt: skip


class _Relay(QObject):
    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(str)


class QuantLabDialog(QDialog):
    """Runs the quant lab in its own engine process on a worker thread (the chat's
    engine keeps its model); every row is also cached for the quant advice."""

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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.relay = _Relay()
        self.relay.progress.connect(self._on_progress)
        self.relay.finished.connect(self.show_rows)
        self.relay.failed.connect(self.status.setText)
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self._stop.set)

    def start(self) -> None:
        self._stop.clear()
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self._thread = threading.Thread(target=self._work, name="vllmchat-quant-lab", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        from vllmchat.core.app.engines import open_local
        from vllmchat.core.engine import EngineError
        from vllmchat.core.tuning.quant_lab import compare

        engine = open_local()
        try:
            for event in compare(engine, self.files, should_stop=self._stop.is_set):
                if isinstance(event, QuantProgress):
                    self.relay.progress.emit(event)
                elif isinstance(event, QuantsCompared):
                    self.relay.finished.emit(event)
        except (EngineError, ValueError, OSError) as exc:
            self.relay.failed.emit(f"The comparison failed: {exc}")
        finally:
            engine.close()

    def _on_progress(self, event: QuantProgress) -> None:
        self.status.setText(f"Measuring {event.current} ({event.done + 1} of {event.total})…")

    def show_rows(self, done: QuantsCompared) -> None:
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.table.setRowCount(0)
        for row in done.rows:
            self._add_row(row)
        ok = [r for r in done.rows if not r.error]
        self.chart.clear()
        if ok:
            self.chart.plot([r.size / MIB for r in ok], [r.kld_mean for r in ok], pen=None,
                            symbol="o", symbolBrush="#1f77b4")  # fmt: skip
            for r in ok:
                label = pg.TextItem(r.label, anchor=(0, 1), color="k")
                label.setPos(r.size / MIB, r.kld_mean)
                self.chart.addItem(label)
        self.status.setText(f"Reference: {done.reference}. Lower KLD and higher top-1 agreement "
                            "mean closer to the reference's answers.")  # fmt: skip

    def _add_row(self, r: QuantRow) -> None:
        n = self.table.rowCount()
        self.table.insertRow(n)
        cells = (r.label, f"{r.size / MIB:,.0f} MiB",
                 "reference" if r.reference else f"{r.kld_mean:.4f}",
                 f"{r.top1_agreement * 100:.1f}%", f"{r.perplexity:.3f}",
                 f"{r.prefill_tok_s:.0f}", f"{r.decode_tok_s:.1f}", r.error)  # fmt: skip
        for col, value in enumerate(cells):
            self.table.setItem(n, col, QTableWidgetItem(value))

    def closeEvent(self, event: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        super().closeEvent(event)  # type: ignore[arg-type]
