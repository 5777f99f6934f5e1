"""Marks in the terminal's output: a symbol where the output's encoding can carry it, and
a plain ASCII stand-in (two columns wide too) where it cannot."""

from __future__ import annotations

import locale
from typing import Any

PINNED = ("📌", "* ")
LEFT_OUT = ("× ", "x ")


def glyph(out: Any, mark: tuple[str, str]) -> str:
    """``mark``'s symbol if ``out`` (a text stream) can encode it, else its stand-in."""
    symbol, plain = mark
    encoding = getattr(out, "encoding", None) or locale.getpreferredencoding(False)
    try:
        symbol.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return plain
    return symbol
