"""Marks under an offload slider: a tick at each measured layer count, taller for
faster decode, the pick in its own colour, placements that left less device memory
free than the tuner's margin in red; and a red band over the positions at or past
the memory estimate's bound."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QSlider, QStyle, QWidget


class SliderMarks(QWidget):
    """Ticks aligned with ``slider``'s positions; ``set_marks({layers: tok/s}, pick, under)``
    (``under``: values whose placement left less free than the margin)."""

    def __init__(self, slider: QSlider, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.slider = slider
        self.marks: dict[int, float] = {}
        self.pick: int | None = None
        self.under: set[int] = set()
        self.bound: int | None = None  # the first position at or past the estimate's bound
        self.setMinimumHeight(14)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_marks(
        self, marks: dict[int, float], pick: int | None, under: Iterable[int] = ()
    ) -> None:
        self.marks, self.pick, self.under = dict(marks), pick, set(under) & set(marks)
        self._tip()
        self.update()

    def _tip(self) -> None:
        lines = [
            f"{n} layers: {v:.1f} tok/s"
            + (" (pick)" if n == self.pick else "")
            + (" (under the margin)" if n in self.under else "")
            for n, v in sorted(self.marks.items())
        ]
        if self.bound is not None:
            lines.append(f"From {self.bound} on: past what the estimate says fits (asks first)")
        self.setToolTip("\n".join(lines))

    def set_bound(self, first_past: int | None) -> None:
        """Mark the positions from ``first_past`` on (None: every position fits)."""
        if first_past != self.bound:
            self.bound = first_past
            self._tip()
            self.update()

    def x_of(self, value: int) -> float:
        """The x of a slider value, where the handle's centre would be."""
        handle = self.slider.style().pixelMetric(QStyle.PixelMetric.PM_SliderLength)
        span = max(1, self.slider.maximum() - self.slider.minimum())
        usable = max(1, self.width() - handle)
        return handle / 2 + (value - self.slider.minimum()) / span * usable

    def paintEvent(self, event: QPaintEvent) -> None:
        if not self.marks and self.bound is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.bound is not None:
            step = self.x_of(self.slider.minimum() + 1) - self.x_of(self.slider.minimum())
            left = self.x_of(self.bound) - step / 2
            band = QColor("#d62728")
            band.setAlpha(70)
            painter.fillRect(QRectF(left, 0.0, self.width() - left, float(self.height())), band)
        if not self.marks:
            painter.end()
            return
        top = max(self.marks.values()) or 1.0
        for n, tok_s in self.marks.items():
            height = 3 + (self.height() - 3) * tok_s / top
            color = QColor("#9467bd") if n == self.pick else QColor("#1f77b4")
            if n in self.under:
                color = QColor("#d62728")
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(color)
            x = self.x_of(n)
            bottom = float(self.height())
            painter.drawRect(QRectF(QPointF(x - 1.5, bottom - height), QPointF(x + 1.5, bottom)))
        painter.end()
