"""A tool call in the chat, folded: the tool's icon and one line (the tool, how it ended,
how long), its arguments and result in the tooltip, and unfolded by a click."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from vllmchat.core.tools.events import ToolResult
from vllmchat.ui.chat.fold import Fold
from vllmchat.ui.common.icons import pixmap

TOOLTIP_CHARS = 600

OUTCOMES = {
    "ok": "done",
    "tool_error": "the tool failed",
    "timeout": "timed out",
    "server_failed": "server not running",
    "server_crashed": "server crashed",
    "unknown_tool": "no such tool",
    "invalid_arguments": "arguments do not fit",
    "malformed_call": "call not readable",
    "denied": "denied",
    "repeated": "repeated, not run",
    "step_limit": "step limit reached",
}


def summary_line(result: ToolResult) -> str:
    """``demo_add — done · 0.1 s (cut)``: the call as one line."""
    name = result.call.name or "tool call"
    took = f" · {result.elapsed_s:.1f} s" if result.elapsed_s else ""
    cut = " (cut)" if result.truncated else ""
    return f"{name} — {OUTCOMES.get(result.kind, result.kind)}{took}{cut}"


def details(result: ToolResult) -> str:
    """The call's arguments and what the model was shown, as plain text."""
    arguments = json.dumps(dict(result.call.arguments), ensure_ascii=False, indent=2)
    return f"Arguments:\n{arguments}\n\nResult:\n{result.text.strip()}"


class ToolCallFold(Fold):
    """The tool's icon and a header button (the call's line) over its details, hidden
    until unfolded."""

    def __init__(self, result: ToolResult, parent: QWidget | None = None) -> None:
        super().__init__(body_style="font-family: monospace;", parent=parent)
        self.result = result
        self.mark = QLabel()  # the tool's icon, left of the header's arrow
        self.mark.setPixmap(pixmap("tool"))
        self.mark.setAccessibleName("Tool call")
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        layout.removeWidget(self.header)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        row.addWidget(self.mark)
        row.addWidget(self.header)
        row.addStretch(1)
        layout.insertLayout(0, row)
        self.setAccessibleName(f"Tool call {result.call.name}")
        self.header.setText(summary_line(result))
        text = details(result)
        cut = text if len(text) <= TOOLTIP_CHARS else text[:TOOLTIP_CHARS] + "…"
        self.header.setToolTip(cut)
        self.body.setText(text)


def fold_into(message: QWidget, result: ToolResult, above: QWidget) -> ToolCallFold:
    """Put a call's fold in a reply's bubble, above its text (``above``)."""
    fold = ToolCallFold(result, message)
    layout = message.layout()
    assert isinstance(layout, QVBoxLayout)
    layout.insertWidget(layout.indexOf(above), fold)
    return fold
