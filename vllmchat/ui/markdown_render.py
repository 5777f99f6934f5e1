"""Markdown as the HTML Qt's rich text shows: code blocks highlighted by Pygments in the
light or dark palette, each under a bar with its language and a Copy link; tables and
inline code by Python-Markdown."""

from __future__ import annotations

import html
import re

import markdown
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_FENCE = re.compile(r"^```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
TABLE = '<table border="1" cellspacing="0" cellpadding="4" style="border-color:#999">'
LINKS = {False: "#1a56b8", True: "#8ab4f8"}
STYLES = {False: "default", True: "monokai"}  # Pygments styles for light and dark
BARS = {False: ("#e8e8ee", "#f7f7f9"), True: ("#3a3d41", "#272822")}  # bar, code background


def _code_block(code: str, language: str, index: int, *, dark: bool) -> str:
    try:
        lexer = get_lexer_by_name(language) if language else None
    except ClassNotFound:
        lexer = None
    bar, background = BARS[dark]
    if lexer is not None:
        formatter = HtmlFormatter(noclasses=True, nowrap=True, style=STYLES[dark])
        body = highlight(code, lexer, formatter)
    else:
        body = html.escape(code)
    name = html.escape(language or "text")
    color = "#ddd" if dark else "#333"
    return (
        f'<table width="100%" cellspacing="0" cellpadding="4" '
        f'style="background:{bar}; margin-top:6px"><tr>'
        f'<td style="color:{color}"><small>{name}</small></td>'
        f'<td align="right"><a href="copy:{index}" style="color:{LINKS[dark]}">Copy</a></td>'
        f"</tr></table>"
        f'<pre style="background:{background}; color:{color}; margin-top:0; '
        f'padding:6px">{body}</pre>'
    )


def render(text: str, *, dark: bool = False) -> tuple[str, list[str]]:
    """HTML for ``text`` and the code of each block (for its Copy link)."""
    blocks: list[str] = []
    parts: list[str] = []
    position = 0
    for match in _FENCE.finditer(text):
        parts.append(_markdown(text[position : match.start()]))
        code = match.group(2).rstrip("\n")
        blocks.append(code)
        parts.append(_code_block(code, match.group(1).lower(), len(blocks) - 1, dark=dark))
        position = match.end()
    parts.append(_markdown(text[position:]))
    return "".join(parts), blocks


def _markdown(segment: str) -> str:
    if not segment.strip():
        return ""
    out: str = markdown.markdown(segment, extensions=["tables", "sane_lists"])
    return out.replace("<table>", TABLE)
