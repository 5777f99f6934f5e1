"""The window's icons are files, never emoji: the chat input, a reply with a tool call
and attachment chips drawn offscreen with only the fonts found here, and no text left
that those fonts would draw as the missing-glyph box."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EMOJI = re.compile(
    "[\U0001f000-\U0001faff\ufe0f\u200d"  # pictographs, the emoji selector, the joiner
    "\u231a\u231b\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615\u2648-\u2653\u267f"
    "\u2693\u26a1\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3\u26f5"
    "\u26fa\u26fd\u2705\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797"
    "\u27b0\u27bf\u2b1b\u2b1c\u2b50\u2b55]"  # the rest drawn as emoji by default
)


def test_no_emoji_is_left_in_the_window_s_source():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "vllmchat" / "ui").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if EMOJI.search(line)
    ]
    assert not found, "\n".join(found)


def _texts(widget) -> list[str]:
    """Every text a widget and its children show (rich text as the words it draws)."""
    from PySide6.QtGui import QTextDocument
    from PySide6.QtWidgets import QAbstractButton, QLabel, QPlainTextEdit, QWidget

    texts = []
    for w in [widget, *widget.findChildren(QWidget)]:
        if isinstance(w, QLabel):
            document = QTextDocument()
            document.setHtml(w.text())
            texts += [document.toPlainText(), w.toolTip()]
        elif isinstance(w, QAbstractButton):
            texts += [w.text(), w.toolTip()]
        elif isinstance(w, QPlainTextEdit):
            texts += [w.toPlainText(), w.placeholderText()]
    return texts


def _missing_glyphs(widget) -> set[str]:
    """The characters no font found here can draw (Qt falls back across families)."""
    from PySide6.QtGui import QFont, QFontDatabase, QFontMetrics

    fonts = [QFontMetrics(widget.font())]
    fonts += [QFontMetrics(QFont(family)) for family in QFontDatabase.families()]
    return {
        c
        for text in _texts(widget)
        for c in text
        if not c.isspace() and not any(f.inFontUcs4(ord(c)) for f in fonts)
    }


def _drawn(pixmap) -> bool:
    """Whether an icon's pixmap has a visible pixel."""
    image = pixmap.toImage()
    return any(
        image.pixelColor(x, y).alpha() > 0
        for x in range(image.width())
        for y in range(image.height())
    )


@pytest.mark.parametrize("dark", [False, True])
def test_the_input_a_tool_call_and_chips_draw_their_icons_from_files(qtbot, tmp_path, dark):
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    from vllmchat.core.tools.events import ToolCall, ToolResult
    from vllmchat.ui.chat.chat_input import ChatInput
    from vllmchat.ui.chat.message_widget import MessageWidget
    from vllmchat.ui.chat.tool_call_fold import fold_into
    from vllmchat.ui.common.icons import icon, icon_file
    from vllmchat.ui.window.readouts.status_line import StatusLine

    page = QWidget()
    qtbot.addWidget(page)
    column = QVBoxLayout(page)
    reply = MessageWidget("assistant", "It is sunny in Lisbon.", message_id=2, dark=dark)
    result = ToolCall("w_weather", {"city": "Lisbon"})
    fold = fold_into(reply, ToolResult(result, "ok", "Sunny, 21 °C.", elapsed_s=0.2), reply.body)
    reply.chip_row().add(1, "report.pdf", "3 pages")
    reply.chip_row().add(2, "broken.png", "an image", image=b"not a picture")
    chat_input = ChatInput()
    chat_input.pending.add(3, "notes.md", "120 tokens", removable=True)
    status = StatusLine()
    status.set_plan(900, 2048, 0, document_tokens=120, tool_tokens=80)
    for w in (reply, chat_input, status):
        column.addWidget(w)
    page.resize(720, 420)
    page.show()
    qtbot.waitExposed(page)
    page.grab().save(str(tmp_path / "icons.png"))

    assert chat_input.attach.text() == "" and _drawn(chat_input.attach.icon().pixmap(18, 18))
    assert _drawn(fold.mark.pixmap()) and fold.header.text().startswith("w_weather — done")
    chips = [*reply.chips.chips, *chat_input.pending.chips]
    assert all(_drawn(chip.icon().pixmap(14, 14)) for chip in chips)
    assert [chip.text().split(" · ")[0] for chip in chips] == [
        "report.pdf",
        "broken.png",
        "notes.md",
    ]
    for name in ("document", "tool"):
        assert f"{name}.svg" in status.context_label.text()
    assert _missing_glyphs(page) == set()
    # the dark scheme's files are their own
    assert icon_file("attach", True) != icon_file("attach", False)
    assert not icon("attach", dark).isNull()


def test_the_status_bar_s_passing_messages_show_beside_the_status_line(qtbot):
    from PySide6.QtWidgets import QMainWindow

    from vllmchat.ui.window.readouts.status_line import StatusLine

    window = QMainWindow()
    qtbot.addWidget(window)
    line = StatusLine()
    window.statusBar().addPermanentWidget(line, 1)
    window.statusBar().messageChanged.connect(line.show_message)
    window.show()
    window.statusBar().showMessage("Exported to chat.md", 10_000)
    assert line.message.text() == "Exported to chat.md" and line.message.isVisible()
    window.statusBar().clearMessage()
    assert line.message.text() == ""
