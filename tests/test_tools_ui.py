"""The Tools tab and the approval prompt (real widgets offscreen, real MCP servers)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vllmchat.core.tools.events import Approval, ApprovalNeeded, ToolCall, ToolInfo

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def test_the_approval_prompt_answers_the_waiting_call(qtbot) -> None:
    from vllmchat.core.app.tools.service import ToolsService
    from vllmchat.ui.chat.approval_prompt import ApprovalPrompt

    prompt = ApprovalPrompt()
    qtbot.addWidget(prompt)
    service = ToolsService()  # the answer is an intent to the application layer's service
    prompt.answered.connect(service.answer)
    event = ApprovalNeeded(ToolCall("demo_add", {"a": 2}), ToolInfo("demo", "add", "Add."))
    prompt.ask(event)
    assert not prompt.isHidden()
    assert '"a": 2' in prompt.arguments.toPlainText() and "add" in prompt.title.text()
    prompt.reason.setText("not today")
    with qtbot.waitSignal(prompt.answered):
        prompt.deny.click()
    assert event.answer.result(0) == Approval("deny", "not today")
    assert prompt.isHidden()

    again = ApprovalNeeded(ToolCall("demo_add", {}), ToolInfo("demo", "add"))
    prompt.ask(again)
    prompt.reason.setText("ignored unless denied")
    prompt.conversation.click()
    assert again.answer.result(0) == Approval("conversation")


def test_the_tools_tab_refuses_a_broken_config_and_shows_where(qtbot, tmp_path: Path) -> None:
    from vllmchat.ui.dialogs.tools_tab import ToolsTab

    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}}\n')
    tab = ToolsTab(path)
    qtbot.addWidget(tab)
    tab.editor.setPlainText('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n')
    assert not tab.save_text()
    assert "line 3, column 26" in tab.message.text()
    assert tab.editor.textCursor().blockNumber() == 2
    assert path.read_text() == '{"mcpServers": {}}\n'  # nothing written


def test_the_tools_tab_saves_imports_and_starts_servers(qtbot, tmp_path: Path) -> None:
    from vllmchat.ui.dialogs.tools_tab import ToolsTab

    path = tmp_path / "mcp.json"
    tab = ToolsTab(path)
    qtbot.addWidget(tab)
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": [SERVER, "stdio"]}}}
    tab.editor.setPlainText(json.dumps(config))
    assert tab.save_text()
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": {"gone": {"command": "no-such-mcp-command"}}}))
    tab.import_file(source)
    assert "Imported gone" in tab.message.text()
    assert set(json.loads(path.read_text())["mcpServers"]) == {"demo", "gone"}
    tab.start.click()
    qtbot.waitUntil(lambda: tab.servers.count() == 2, timeout=60_000)
    texts = [tab.servers.item(i).text() for i in range(2)]
    assert texts[0].startswith("demo: ready") and "add" in texts[0]
    assert texts[1].startswith("gone: failed") and "not found" in texts[1]
