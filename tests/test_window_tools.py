"""MCP tools in the window: the real demo model, a real stdio MCP server, real widgets.

SmolLM2's template has no tool format and the small model does not call tools by
itself, so these turns ask for a call (``tool_choice="required"``: the call is
grammar-constrained, then the model answers the result in plain text).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.tools.events import ToolCallFinished, ToolResult
from vllmchat.ui.chat.tool_call_fold import ToolCallFold

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")
QUESTION = "What is the weather in Lisbon today?"


def use_weather(window, tmp_path: Path) -> Path:
    config = tmp_path / "mcp.json"
    servers = {"w": {"command": sys.executable, "args": [SERVER, "weather"]}}
    config.write_text(json.dumps({"mcpServers": servers}))
    window.tool_actions.config_file = config
    window.tool_actions.tool_choice = "required"
    window.tool_actions.start()
    return config


def folds(window) -> list[ToolCallFold]:
    return window.chat.messages()[-1].findChildren(ToolCallFold)


def calls(window) -> list[ToolResult]:
    """The window's calls in order, as the application layer's tools service tells them."""
    results: list[ToolResult] = []

    def heard(event: object) -> None:
        if isinstance(event, ToolCallFinished):
            results.append(event.result)

    window.bridge.app.tools.subscribe(heard)
    return results


def turns(window) -> list[object]:
    """The turns' ends the window shows from now on, as its ``turn_ended`` tells them."""
    ended: list[object] = []
    window.turn_ended.connect(ended.append)
    return ended


def test_a_call_waits_for_the_prompt_and_shows_folded_in_its_reply(
    demo_window, qtbot, tmp_path: Path
) -> None:
    w, store, _ = demo_window
    ended = turns(w)
    config = use_weather(w, tmp_path)
    results = calls(w)
    w.send(QUESTION)
    qtbot.waitUntil(lambda: not w.approval.isHidden(), timeout=300_000)
    assert "weather" in w.approval.title.text() and "Lisbon" in w.approval.arguments.toPlainText()
    assert len(ended) == 0  # the model's call is a step, not the turn's end
    w.approval.always.click()
    qtbot.waitUntil(lambda: len(ended) == 1, timeout=300_000)
    assert w.approval.isHidden()
    [result] = results
    assert result.kind == "ok" and "Sunny and 21 degrees in Lisbon" in result.text
    [fold] = folds(w)
    assert fold.header.text().startswith("w_weather — done") and not fold.mark.pixmap().isNull()
    assert "Sunny" in fold.header.toolTip() and fold.body.isHidden()
    fold.header.click()
    assert not fold.body.isHidden()
    reply = w.chat.messages()[-1]
    assert '"name"' not in reply.text  # the call as the model wrote it is shown folded
    assert store.path_to_show(w.conversation_id)[-1].content == w.last_turn.text
    assert json.loads((tmp_path / "mcp-approved.json").read_text()) == ["w_weather"]
    reply_id = store.path_to_show(w.conversation_id)[-1].id
    assert ToolStepList(store).of_messages([reply_id]) == {reply_id: [result]}
    w.render_conversation()  # as when the conversation is opened again
    assert [f.result for f in folds(w)] == [result]

    assert "w_weather" in w.bridge.app.tools.policy.always  # the next call runs without asking

    config.write_text('{"mcpServers": {"w": }')
    w.tool_actions.start()
    assert "MCP servers not used" in w.statusBar().currentMessage()
    assert "line 1" in w.statusBar().currentMessage()


def test_a_denied_call_tells_the_model_why_and_a_new_config_is_used_next_turn(
    demo_window, qtbot, tmp_path: Path
) -> None:
    w, _, _ = demo_window
    ended = turns(w)
    use_weather(w, tmp_path)
    results = calls(w)
    w.send(QUESTION)
    qtbot.waitUntil(lambda: not w.approval.isHidden(), timeout=300_000)
    w.approval.reason.setText("not now")
    w.approval.deny.click()
    qtbot.waitUntil(lambda: len(ended) == 1, timeout=300_000)
    [result] = results
    assert result.kind == "denied" and "not now" in result.text
    assert folds(w)[0].header.text().startswith("w_weather — denied")

    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    w.tool_actions.start()  # as the Tools dialog does when it closes
    w.send(QUESTION)
    qtbot.waitUntil(lambda: len(ended) == 2, timeout=300_000)
    assert len(results) == 1 and not folds(w)  # no tools offered now


def test_the_conversation_offers_the_checked_tools_and_an_always_approval_is_revoked(
    demo_window, qtbot, tmp_path: Path
) -> None:
    from PySide6.QtCore import Qt

    from vllmchat.core.app.events import ToolPickChanged

    w, _, _ = demo_window
    ended = turns(w)
    config = tmp_path / "mcp.json"
    servers = {
        "demo": {"command": sys.executable, "args": [SERVER, "stdio"]},
        "w": {"command": sys.executable, "args": [SERVER, "weather"]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    actions = w.tool_actions
    actions.config_file, actions.tool_choice = config, "required"
    actions.start()
    qtbot.waitUntil(lambda: w.bridge.app.tools.active, timeout=30_000)
    results = calls(w)
    actions.open_pick()  # the servers start to list their tools
    qtbot.waitUntil(lambda: actions.pick.item_named("w_weather") is not None, timeout=60_000)
    qtbot.waitUntil(lambda: actions.pick.item_named("demo_add") is not None, timeout=60_000)
    changed: list[ToolPickChanged] = []
    w.bridge.events.tools.pick_changed.connect(changed.append)
    actions.pick.item_named("demo").setCheckState(Qt.CheckState.Unchecked)
    assert changed and changed[-1].off == ("demo",) and "offered: w_weather" in changed[-1].message
    assert not actions.pick.item_named("demo_add").flags() & Qt.ItemFlag.ItemIsEnabled
    assert w.bridge.app.tool_picks.pick(w.conversation_id).off == {"demo"}
    actions.pick_dialog.close()

    w.send(QUESTION)
    qtbot.waitUntil(lambda: not w.approval.isHidden(), timeout=300_000)
    assert "weather" in w.approval.title.text()  # the one tool offered
    w.approval.always.click()
    qtbot.waitUntil(lambda: len(ended) == 1, timeout=300_000)
    assert [r.call.name for r in results] == ["w_weather"]
    assert "tool.svg" in w.status_line.context_label.text()  # the tool schemas' share, its icon
    assert json.loads((tmp_path / "mcp-approved.json").read_text()) == ["w_weather"]

    actions.open_servers()
    assert actions.approved.names() == ["w_weather"]
    actions.approved.list.setCurrentRow(0)
    assert actions.approved.revoke.isEnabled()
    actions.approved.revoke.click()
    assert json.loads((tmp_path / "mcp-approved.json").read_text()) == []
    assert "w_weather" not in w.bridge.app.tools.policy.always and actions.approved.names() == []
    assert not actions.approved.revoke.isEnabled()
    actions.dialog.close()


def test_a_server_that_does_not_start_is_said_once_in_the_reply(
    demo_window, qtbot, tmp_path: Path
) -> None:
    from PySide6.QtWidgets import QLabel

    w, _, _ = demo_window
    ended = turns(w)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"gone": {"command": "vllmchat-no-such-mcp"}}}))
    w.tool_actions.config_file, w.tool_actions.tool_choice = config, "required"
    w.tool_actions.start()

    def notes() -> list[str]:
        reply = w.chat.messages()[-1]
        return [n.text() for n in reply.findChildren(QLabel, "tools-unavailable")]

    w.send("Hello.")
    qtbot.waitUntil(lambda: len(ended) == 1, timeout=300_000)
    qtbot.waitUntil(lambda: bool(notes()), timeout=10_000)
    [note] = notes()
    assert "The MCP server 'gone' is not working" in note and "'vllmchat-no-such-mcp'" in note
    assert "no MCP server is working: turns run without tools" in note
    w.send("Hello again.")
    qtbot.waitUntil(lambda: len(ended) == 2, timeout=300_000)
    assert notes() == []  # said once, at the turn it first left without tools
