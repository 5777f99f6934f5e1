"""Charts of measured points: speed and memory against what was varied (pyqtgraph)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence

import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from vllmchat.core.models.memory import MIB
from vllmchat.core.tuning.results import TuneConfig, TunePoint

CSV_FIELDS = (
    "n_gpu_layers",
    "n_cpu_moe",
    "tensor_split",
    "n_threads",
    "n_threads_batch",
    "n_ubatch",
    "fits",
    "prefill_tok_s",
    "decode_tok_s",
    "vram_mib",
    "vram_buffers_mib",
    "estimate_vram_mib",
    "ram_mib",
    "note",
)

# What a sweep can vary, in the order a chart prefers it: (label, key of a config).
AXES: tuple[tuple[str, Callable[[TuneConfig], int]], ...] = (
    ("experts of layers in RAM (n_cpu_moe)", lambda c: c.placement.n_cpu_moe),
    ("GPU layers", lambda c: c.placement.n_gpu_layers),
    ("CPU threads", lambda c: c.n_threads),
    ("ubatch", lambda c: c.n_ubatch),
)


def _mib(value: int | None) -> float | None:
    return round(value / MIB, 1) if value is not None else None


def write_csv(path: str, points: Sequence[TunePoint]) -> None:
    """The measured points as CSV (one row per configuration)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(CSV_FIELDS)
        for p in points:
            c = p.config
            out.writerow(
                [
                    c.placement.n_gpu_layers,
                    c.placement.n_cpu_moe,
                    c.placement.tensor_split,
                    c.n_threads,
                    c.n_threads_batch,
                    c.n_ubatch,
                    p.fits,
                    round(p.prefill_tok_s, 2),
                    round(p.decode_tok_s, 2),
                    _mib(p.vram),
                    _mib(p.vram_buffers),
                    _mib(p.estimate_vram),
                    _mib(p.ram),
                    p.note,
                ]
            )


def varied_axis(points: Sequence[TunePoint]) -> tuple[str, Callable[[TuneConfig], int]]:
    """The first dimension the measured points vary in (placement before threads)."""
    for label, key in AXES:
        if len({key(p.config) for p in points}) > 1:
            return label, key
    return AXES[1]


class TuningChart(QWidget):
    """Prefill and decode tok/s (top) and memory (bottom) against what the sweep
    varied (expert placement, GPU layers, threads or ubatch); every measured point
    is drawn, the main curve joins those at the most common other settings; points
    that left less device memory free than the tuner's margin are red crosses."""

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
        for plot in (self.speed, self.prompt, self.memory):
            plot.getAxis("bottom").enableAutoSIPrefix(False)
        layout.addWidget(self.speed)
        layout.addWidget(self.prompt)
        layout.addWidget(self.memory)
        self.axis_label, self.key = AXES[1]
        self.under_margin_x: list[int] = []

    def mark_pick(self, pick: TuneConfig) -> None:
        """A vertical line at the pick on every plot."""
        dotted = pg.QtCore.Qt.PenStyle.DotLine
        for plot in (self.speed, self.prompt, self.memory):
            pen = pg.mkPen("#9467bd", width=1, style=dotted)
            plot.addItem(pg.InfiniteLine(pos=self.key(pick), angle=90, label="pick", pen=pen))

    def show_points(self, points: Sequence[TunePoint], limit: int = 0) -> None:
        """Draw every point that fit; the curve joins those at the most common settings
        of the other dimensions."""
        fitting = [p for p in points if p.fits]
        self.under_margin_x = []
        self.speed.clear()
        self.prompt.clear()
        self.memory.clear()
        if not fitting:
            return
        self.axis_label, key = self.key_of(fitting)
        self.memory.setLabel("bottom", self.axis_label)

        def others(p: TunePoint) -> tuple[int, ...]:
            return tuple(k(p.config) for _, k in AXES if k is not key)

        common = max(
            {others(p) for p in fitting}, key=lambda o: sum(others(p) == o for p in fitting)
        )
        curve = sorted((p for p in fitting if others(p) == common), key=lambda p: key(p.config))
        xs = [key(p.config) for p in curve]
        all_x = [key(p.config) for p in fitting]
        series = (
            (self.speed, "decode_tok_s", "#1f77b4", "o"),
            (self.prompt, "prefill_tok_s", "#ff7f0e", "t"),
        )
        for plot, attr, color, symbol in series:
            plot.plot(
                all_x,
                [getattr(p, attr) for p in fitting],
                pen=None,
                symbol=symbol,
                symbolBrush=pg.mkColor(color).lighter(160),
                symbolSize=7,
            )
            plot.plot(
                xs,
                [getattr(p, attr) for p in curve],
                pen=pg.mkPen(color, width=2),
                symbol=symbol,
                symbolBrush=color,
            )
        on_gpu = any(p.vram is not None for p in fitting)
        self.memory.setTitle("Device memory" if on_gpu else "Engine RAM")
        used = [(key(p.config), v) for p in curve if (v := p.vram if on_gpu else p.ram)]
        if used:
            self.memory.plot(
                [x for x, _ in used],
                [v / MIB for _, v in used],
                pen=pg.mkPen("#2ca02c", width=2),
                symbol="o",
                symbolBrush="#2ca02c",
                name="measured",
            )
        est = [(key(p.config), p.estimate_vram) for p in curve if p.estimate_vram]
        if est:
            self.memory.plot(
                [x for x, _ in est],
                [v / MIB for _, v in est],
                pen=pg.mkPen("#7f7f7f", width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
                name="estimate",
            )
        if limit > 0 and on_gpu:
            line = pg.InfiniteLine(
                pos=limit / MIB, angle=0, label="available", pen=pg.mkPen("#d62728", width=1)
            )
            self.memory.addItem(line)
        under = [p for p in fitting if p.under_margin]
        self.under_margin_x = sorted({key(p.config) for p in under})
        if under:  # measured, but under the margin: never picked
            self.speed.plot(
                [key(p.config) for p in under],
                [p.decode_tok_s for p in under],
                pen=None,
                symbol="x",
                symbolBrush="#d62728",
                symbolPen="#d62728",
                symbolSize=11,
                name="under the margin",
            )
        lo, hi = min(all_x), max(all_x)
        pad = max(1, (hi - lo) // 20)
        self.speed.setXRange(lo - pad, hi + pad, padding=0)

    def key_of(self, points: Sequence[TunePoint]) -> tuple[str, Callable[[TuneConfig], int]]:
        self.axis_label, self.key = varied_axis(points)
        return self.axis_label, self.key

    def save_png(self, path: str) -> bool:
        return bool(self.grab().save(path, "PNG"))
