"""How a model's fit on this machine is shown: the badge's words and colour, sizes."""

from __future__ import annotations

from PySide6.QtGui import QColor

from vllmchat.core.models.advisor import GPU_FULL, GPU_PARTIAL, NO_FIT, RAM_ONLY, Fit
from vllmchat.core.models.memory import MIB

BADGE_COLORS = {GPU_FULL: "#2e7d32", GPU_PARTIAL: "#f9a825", RAM_ONLY: "#1565c0", NO_FIT: "#c62828"}


def badge(fit: Fit) -> tuple[str, str]:
    """The badge's words and colour for a fit."""
    return fit.short, BADGE_COLORS[fit.kind]


def size_text(n: int) -> str:
    """Bytes in MiB, or GiB from one GiB up."""
    return f"{n / MIB:,.0f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


def tint(color: str) -> QColor:
    """The badge's colour, light enough to read black text on."""
    c = QColor(color)
    return QColor(c.red(), c.green(), c.blue(), 60)
