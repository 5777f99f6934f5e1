"""The application layer's tools service: real MCP servers (``tests/mcp_servers``), its
events as a front end hears them, and the turns that go without their tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.tool_configs import server, write_config
from vllmchat.bench.tools.tools_bench import RecordedEngine
from vllmchat.core.app.tools.service import ToolsService
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolCallStarted,
    ToolInfo,
    ToolsConfigProblem,
    ToolsUnavailable,
)
from vllmchat.core.tools.unavailable import unavailable

ADD = '{"name": "demo_add", "arguments": {"a": 2, "b": 40}}'
QUESTION = [{"role": "user", "content": "What is 2 plus 40?"}]


def _heard(service: ToolsService) -> list[object]:
    events: list[object] = []
    service.subscribe(events.append)
    return events


def test_a_config_the_user_named_that_does_not_exist_is_said_with_its_path(
    tmp_path: Path,
) -> None:
    service = ToolsService()
    heard = _heard(service)
    missing = tmp_path / "nope" / "mcp.json"
    problem = service.use(missing, must_exist=True)
    assert isinstance(problem, ToolsConfigProblem) and heard == [problem]
    assert str(missing) in problem.message and "does not exist" in problem.message
    assert "No MCP servers" not in problem.message
    assert service.use(missing) is None and not service.active  # the default file: none yet
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"a": }')
    checked = service.check(broken)
    assert checked is not None and "line 1, column 22" in checked.message
    assert len(heard) == 1  # a check is a query: nothing announced


def test_a_call_is_asked_answered_run_and_each_step_announced(tmp_path: Path) -> None:
    service = ToolsService()
    heard = _heard(service)
    assert service.use(write_config(tmp_path, {"demo": server()})) is None
    answers: list[str] = []

    def front_end(event: object) -> None:  # as the terminal answers: an intent
        if isinstance(event, ApprovalNeeded):
            answers.append(service.answer(event, Approval("always")))

    service.subscribe(front_end)
    try:
        stream = service.turn_stream(RecordedEngine(None, ADD), "c1", lambda: False, max_steps=1)
        events = list(stream(QUESTION, None, ()))  # type: ignore[arg-type]
        finished = [e.result for e in events if isinstance(e, ToolCallFinished)]
        first = finished[0]
        assert (first.call.name, first.kind, first.text) == ("demo_add", "ok", "42")
        kinds = [type(e) for e in heard if not isinstance(e, ServerStatus)]
        assert kinds[:3] == [ApprovalNeeded, ToolCallStarted, ToolCallFinished]
        assert answers == [""]  # kept in mcp-approved.json
        assert json.loads((tmp_path / "mcp-approved.json").read_text()) == ["demo_add"]
        revoked = service.revoke("demo_add")
        assert revoked.was_always and not revoked.failed and revoked in heard
        assert json.loads((tmp_path / "mcp-approved.json").read_text()) == []
    finally:
        service.close()


def test_servers_that_did_not_start_are_said_once_at_the_turn_without_their_tools(
    tmp_path: Path,
) -> None:
    servers = {
        "gone": {"command": "vllmchat-no-such-server"},
        "quits": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        "hangs": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]},
    }
    service = ToolsService(start_timeout_s=1)
    heard = _heard(service)
    service.use(write_config(tmp_path, servers), tool_choice="required")
    try:
        for _ in range(2):
            stream = service.turn_stream(RecordedEngine(None, "Hello."), "c1", lambda: False)
            list(stream(QUESTION, None, ()))  # type: ignore[arg-type]
        [told] = [e for e in heard if isinstance(e, ToolsUnavailable)]
        assert {s.server for s in told.failed} == {"gone", "quits", "hangs"}
        assert "'vllmchat-no-such-server' was not found" in told.message
        assert "exited before it was ready" in told.message
        assert "did not start within 1 s" in told.message
        assert told.required_unmet and "no MCP server is working" in told.message
    finally:
        service.close()


def test_each_cause_is_said_again_only_after_it_went_away() -> None:
    failed = ServerStatus("a", "failed", message="it exited before it was ready")
    ready = ServerStatus("a", "ready", (ToolInfo("a", "t"),))
    event, told = unavailable([failed], [], "auto", set())
    assert event is not None and not event.required_unmet and event.failed == (failed,)
    assert unavailable([failed], [], "auto", told)[0] is None
    _, told = unavailable([ready], [ToolInfo("a", "t")], "auto", told)
    again, told = unavailable([failed], [], "auto", told)
    assert again is not None and again.failed == (failed,)
    off, _ = unavailable([ready], [], "required", set())
    assert off is not None and "every tool is off in this conversation" in off.message
