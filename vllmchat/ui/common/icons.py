"""The window's icons: SVG files in ``resources/icons/`` (``dark/`` beside them for the
dark scheme), never emoji in text, which many desktops draw as an empty box."""

from __future__ import annotations

import functools
from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtGui import QIcon, QPixmap

from vllmchat.core.resources import resource_path
from vllmchat.ui.common.theme import is_dark

ICON_NAMES = ("attach", "copy", "document", "edit", "image", "pin", "regenerate", "summary", "tool")
"""Every icon drawn in the window, each in a light and a dark file."""
INLINE_SIDE = 14  # px: an icon in a line of text


def icon_file(name: str, dark: bool) -> Path:
    """The SVG file of icon ``name`` for the light or the dark scheme (the light one where
    no dark one is bundled)."""
    if dark:
        try:
            return resource_path(f"icons/dark/{name}.svg")
        except FileNotFoundError:
            pass
    return resource_path(f"icons/{name}.svg")


@functools.cache
def _icon(name: str, dark: bool) -> QIcon:
    try:
        return QIcon(str(icon_file(name, dark)))
    except FileNotFoundError:
        return QIcon()


def icon(name: str, dark: bool | None = None) -> QIcon:
    """Icon ``name`` for the scheme ``dark`` (the system's when None)."""
    return _icon(name, is_dark() if dark is None else dark)


def pixmap(name: str, side: int = INLINE_SIDE, dark: bool | None = None) -> QPixmap:
    """Icon ``name`` drawn ``side`` pixels square (for a label beside text)."""
    return icon(name, dark).pixmap(QSize(side, side))


def inline_html(name: str, side: int = INLINE_SIDE, dark: bool | None = None) -> str:
    """Icon ``name`` as an ``<img>`` for a rich-text label, centred on the line."""
    try:
        url = icon_file(name, is_dark() if dark is None else dark).as_uri()
    except FileNotFoundError:
        return ""
    return f'<img src="{url}" width="{side}" height="{side}" style="vertical-align: middle">'
