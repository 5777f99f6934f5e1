"""The voice's icons, drawn from SVG held here: a microphone, a speaker, the hands-free
loop (never emoji in text, which many desktops draw as an empty box)."""

from __future__ import annotations

import functools

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

from vllmchat.ui.common.theme import is_dark

_STROKE = {False: "#5f6368", True: "#bdc1c6"}
RECORDING = "#d93025"  # the microphone while it records
WRITING = "#1a73e8"  # and while what was said is written down
_HEAD = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16" '
    'fill="none" stroke="{stroke}" stroke-width="1.4" stroke-linecap="round" '
    'stroke-linejoin="round">'
)
_SHAPES = {
    "mic": (
        '<rect x="5.6" y="1.6" width="4.8" height="8" rx="2.4" fill="{fill}"/>'
        '<path d="M3.4 7.6a4.6 4.6 0 0 0 9.2 0M8 12.2v2.4M5.6 14.6h4.8"/>'
    ),
    "speaker": (
        '<path d="M2.2 6h2.6l3.6-3v10l-3.6-3H2.2z" fill="{fill}"/>'
        '<path d="M10.6 5.6a3.4 3.4 0 0 1 0 4.8M12.4 3.8a6 6 0 0 1 0 8.4"/>'
    ),
    "hands-free": (
        '<rect x="6" y="4.2" width="4" height="6" rx="2" fill="{fill}"/>'
        '<path d="M13.4 6.4A5.6 5.6 0 0 0 3 4.6M2.6 9.6A5.6 5.6 0 0 0 13 11.4"/>'
        '<path d="M3 2v2.6h2.6M13 14v-2.6h-2.6"/>'
    ),
}
GLYPHS = tuple(_SHAPES)


def glyph_svg(name: str, *, dark: bool, color: str | None = None, filled: bool = False) -> str:
    """The SVG of glyph ``name``: stroked in the scheme's grey (or ``color``), its body
    filled when ``filled``."""
    stroke = color or _STROKE[dark]
    body = _SHAPES[name].format(fill=stroke if filled else "none")
    return _HEAD.format(stroke=stroke) + body + "</svg>"


@functools.cache
def _glyph(name: str, dark: bool, color: str | None, filled: bool) -> QIcon:
    svg = glyph_svg(name, dark=dark, color=color, filled=filled)
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    result = QIcon()
    for side in (16, 24, 32, 48):
        picture = QPixmap(QSize(side, side))
        picture.fill(Qt.GlobalColor.transparent)
        painter = QPainter(picture)
        renderer.render(painter, QRectF(0, 0, side, side))
        painter.end()
        result.addPixmap(picture)
    return result


def glyph(
    name: str, dark: bool | None = None, *, color: str | None = None, filled: bool = False
) -> QIcon:
    """Glyph ``name`` as an icon for the scheme ``dark`` (the system's when None)."""
    return _glyph(name, is_dark() if dark is None else dark, color, filled)
