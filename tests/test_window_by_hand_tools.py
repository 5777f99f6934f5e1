"""The window's own control for a required tool call: the MCP servers dialog's
"Begin each turn with a tool call", then a turn on the demo model and a real stdio MCP
server whose call waits for the prompt (real widgets offscreen)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vllmchat.ui.chat.tool_call_fold import ToolCallFold

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def test_the_servers_dialog_asks_each_turn_to_begin_with_a_call(
    demo_window, qtbot, tmp_path: Path
) -> None:
    w, _, _ = demo_window
    actions = w.tool_actions
    config = tmp_path / "mcp.json"
    servers = {"w": {"command": sys.executable, "args": [SERVER, "weather"]}}
    config.write_text(json.dumps({"mcpServers": servers}))
    actions.config_file = config

    actions.open_servers()
    box = actions.require_call
    assert not box.isChecked() and box.text() == "Begin each turn with a tool call"
    box.click()
    assert w.bridge.app.tools.tool_choice == "auto"  # used when the dialog closes
    actions.dialog.reject()
    qtbot.waitUntil(lambda: w.bridge.app.tools.tool_choice == "required", timeout=10_000)

    ended: list[object] = []
    w.turn_ended.connect(ended.append)
    w.send("What is the weather in Lisbon today?")
    qtbot.waitUntil(lambda: not w.approval.isHidden(), timeout=300_000)
    assert "weather" in w.approval.title.text() and "Lisbon" in w.approval.arguments.toPlainText()
    w.approval.deny.click()
    qtbot.waitUntil(lambda: len(ended) == 1, timeout=300_000)
    assert w.approval.isHidden()
    [fold] = w.chat.messages()[-1].findChildren(ToolCallFold)
    assert fold.header.text().startswith("w_weather — denied")

    actions.open_servers()
    assert actions.require_call.isChecked()  # the dialog shows the choice in use
    actions.require_call.click()
    actions.dialog.reject()
    qtbot.waitUntil(lambda: w.bridge.app.tools.tool_choice == "auto", timeout=10_000)
