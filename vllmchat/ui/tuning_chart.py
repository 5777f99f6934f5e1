"""Charts of measured points: speed and memory against GPU layers (pyqtgraph)."""

from __future__ import annotations

import csv
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from vllmchat.core.models.memory import MIB
from vllmchat.core.tuning.results import TunePoint

CSV_FIELDS = ("n_gpu_layers", "n_threads", "n_threads_batch", "n_ubatch", "fits",
              "prefill_tok_s", "decode_tok_s", "vram_mib", "vram_buffers_mib",
              "estimate_vram_mib", "ram_mib", "note")  # fmt: skip


def _mib(value: int | None) -> float | None:
    return round(value / MIB, 1) if value is not None else None


def write_csv(path: str, points: Sequence[TunePoint]) -> None:
    """The measured points as CSV (one row per configuration)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(CSV_FIELDS)
        for p in points:
            c = p.config
            out.writerow([c.n_gpu_layers, c.n_threads, c.n_threads_batch, c.n_ubatch, p.fits,
                          round(p.prefill_tok_s, 2), round(p.decode_tok_s, 2), _mib(p.vram),
                          _mib(p.vram_buffers), _mib(p.estimate_vram), _mib(p.ram),
                          p.note])  # fmt: skip


class TuningChart(QWidget):
    """Prefill and decode tok/s (top) and device memory (bottom) against GPU layers,
    with the memory available as a line."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=True, background="w", foreground="k")
        layout = QVBoxLayout(self)
        # Decode and prompt speeds differ by orders of magnitude: one plot each.
        self.speed = pg.PlotWidget(title="Decode")
        self.speed.setLabel("left", "tok/s")
        self.prompt = pg.PlotWidget(title="Prompt processing")
        self.prompt.setLabel("left", "tok/s")
        self.prompt.setXLink(self.speed)
        self.memory = pg.PlotWidget(title="Device memory")
        self.memory.setLabel("left", "MiB")
        self.memory.setLabel("bottom", "GPU layers")
        self.memory.addLegend()
        self.memory.setXLink(self.speed)
        layout.addWidget(self.speed)
        layout.addWidget(self.prompt)
        layout.addWidget(self.memory)
        self._limit: pg.InfiniteLine | None = None

    def mark_pick(self, layers: int) -> None:
        """A vertical line at the picked layer count on every plot."""
        dotted = pg.QtCore.Qt.PenStyle.DotLine
        for plot in (self.speed, self.prompt, self.memory):
            pen = pg.mkPen("#9467bd", width=1, style=dotted)
            plot.addItem(pg.InfiniteLine(pos=layers, angle=90, label="pick", pen=pen))

    def show_points(self, points: Sequence[TunePoint], limit: int = 0) -> None:
        """Draw the points that fit (at the thread count most of them share)."""
        fitting = [p for p in points if p.fits]
        self.speed.clear()
        self.prompt.clear()
        self.memory.clear()
        if not fitting:
            return
        threads = max({p.config.n_threads for p in fitting},
                      key=lambda t: sum(p.config.n_threads == t for p in fitting))  # fmt: skip
        curve = sorted((p for p in fitting if p.config.n_threads == threads),
                       key=lambda p: p.config.n_gpu_layers)  # fmt: skip
        xs = [p.config.n_gpu_layers for p in curve]
        dec = pg.mkPen("#1f77b4", width=2)
        pre = pg.mkPen("#ff7f0e", width=2)
        self.speed.plot(xs, [p.decode_tok_s for p in curve], pen=dec, symbol="o",
                        symbolBrush="#1f77b4", name="decode")  # fmt: skip
        self.prompt.plot(xs, [p.prefill_tok_s for p in curve], pen=pre, symbol="t",
                         symbolBrush="#ff7f0e", name="prefill")  # fmt: skip
        measured = [(p.config.n_gpu_layers, p.vram) for p in curve if p.vram is not None]
        if measured:
            self.memory.plot([x for x, _ in measured], [v / MIB for _, v in measured],
                             pen=pg.mkPen("#2ca02c", width=2), symbol="o",
                             symbolBrush="#2ca02c", name="measured")  # fmt: skip
        est = [(p.config.n_gpu_layers, p.estimate_vram) for p in curve if p.estimate_vram]
        if est:
            self.memory.plot([x for x, _ in est], [v / MIB for _, v in est],
                             pen=pg.mkPen("#7f7f7f", width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
                             name="estimate")  # fmt: skip
        if limit > 0:
            line = pg.InfiniteLine(pos=limit / MIB, angle=0, label="available",
                                   pen=pg.mkPen("#d62728", width=1))  # fmt: skip
            self.memory.addItem(line)

    def save_png(self, path: str) -> bool:
        return bool(self.grab().save(path, "PNG"))
