"""Markdown as the HTML Qt's rich text shows, parsed as CommonMark with GFM tables by
markdown-it-py (an unclosed code fence runs to the end of the message, as in
CommonMark, and the same text renders the same while streaming and after): code
blocks highlighted by Pygments in the light or dark palette, each under a bar with
its language and a Copy link."""

from __future__ import annotations

import functools
import html
from typing import Any

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound
from PySide6.QtCore import QObject, QTimer

TABLE = '<table border="1" cellspacing="0" cellpadding="4" style="border-color:#999">'
LINKS = {False: "#1a56b8", True: "#8ab4f8"}
STYLES = {False: "default", True: "monokai"}  # Pygments styles for light and dark
BARS = {False: ("#e8e8ee", "#f7f7f9"), True: ("#3a3d41", "#272822")}  # bar, code background


@functools.lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    """Pygments' lexer for a language, made once (finding and building one is slow)."""
    try:
        return get_lexer_by_name(language) if language else None
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=2)
def _formatter(dark: bool) -> HtmlFormatter:
    return HtmlFormatter(noclasses=True, nowrap=True, style=STYLES[dark])


def _code_block(code: str, language: str, index: int, *, dark: bool) -> str:
    lexer = _lexer(language)
    bar, background = BARS[dark]
    body = highlight(code, lexer, _formatter(dark)) if lexer is not None else html.escape(code)
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


def _fence(self: Any, tokens: Any, idx: int, options: Any, env: dict[str, Any]) -> str:
    """A fenced or indented code block: highlighted, under its bar (an unclosed fence
    runs to the end of the message, as CommonMark has it)."""
    token = tokens[idx]
    code = token.content.rstrip("\n")
    info = token.info.strip().split() if token.info else []
    blocks: list[str] = env["blocks"]
    blocks.append(code)
    language = info[0].lower() if info else ""
    return _code_block(code, language, len(blocks) - 1, dark=env["dark"])


# CommonMark with GFM tables and strikethrough; raw HTML in a reply is shown as text.
_MD = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_MD.add_render_rule("fence", _fence)
_MD.add_render_rule("code_block", _fence)


def render(text: str, *, dark: bool = False) -> tuple[str, list[str]]:
    """HTML for ``text`` and the code of each block (for its Copy link)."""
    env: dict[str, Any] = {"blocks": [], "dark": dark}
    out: str = _MD.render(text, env)
    return out.replace("<table>", TABLE), env["blocks"]


COMMON_LANGUAGES = (
    "python",
    "bash",
    "json",
    "javascript",
    "typescript",
    "c",
    "cpp",
    "rust",
    "go",
    "java",
    "sql",
    "yaml",
    "html",
    "text",
)


def warm_up(parent: QObject) -> QTimer:
    """Build the common lexers ahead of time, one per tick while the window idles
    (Pygments takes several milliseconds to find and build each the first time)."""
    timer = QTimer(parent)
    timer.setInterval(40)
    languages = list(COMMON_LANGUAGES)

    def next_one() -> None:
        if languages:
            _lexer(languages.pop())
        else:
            timer.stop()

    timer.timeout.connect(next_one)
    timer.start()
    return timer
