"""MCP servers through the manager: real servers in Python (stdio, and HTTP on loopback).

Each bad case ends in a typed outcome within its timeout: a missing command, a server
that dies at start or hangs, a tool error, a crash mid-call, a hanging call, a 1 MB
result, a schema that is not JSON Schema, arguments that do not fit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllmchat.core.tools.config import ServerConfig, ToolsConfig
from vllmchat.core.tools.events import ServerStatus, ToolCall, ToolEvent
from vllmchat.core.tools.manager import ToolServerManager

SERVER = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")


def stdio(name: str, mode: str, **kw: object) -> ServerConfig:
    return ServerConfig(name, command=sys.executable, args=(SERVER, mode), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def demo() -> Iterator[tuple[ToolServerManager, list[ToolEvent]]]:
    events: list[ToolEvent] = []
    config = ToolsConfig((stdio("demo", "stdio", env={"DEMO_VAR": "from-config"}, timeout_s=2.0),))
    manager = ToolServerManager(config, on_event=events.append, result_cap_bytes=1_000_000)
    yield manager, events
    manager.close()


def call(manager: ToolServerManager, tool: str, server: str = "demo", **arguments: object):
    info = next(t for t in manager.status(server).tools if t.name == tool)
    return manager.call(info, ToolCall(info.model_name, arguments)).result(timeout=30)


def test_a_stdio_server_starts_lazily_off_the_callers_thread(demo) -> None:
    manager, events = demo
    assert manager.status("demo").state == "stopped"  # nothing started yet
    future = manager.start("demo")
    status = future.result(timeout=30)
    assert status.state == "ready"
    assert {"add", "echo", "fail", "big", "sleep", "crash", "env"} <= {t.name for t in status.tools}
    states = [e.state for e in events if isinstance(e, ServerStatus)]
    assert states[:2] == ["starting", "ready"]
    assert manager.find_tool("demo_add") is not None


def test_a_call_returns_the_result_and_sees_the_configured_env(demo) -> None:
    manager, _ = demo
    manager.start("demo").result(30)
    result = call(manager, "add", a=2, b=40)
    assert (result.kind, result.text) == ("ok", "42")
    assert call(manager, "env", name="DEMO_VAR").text == "from-config"


def test_a_tool_error_is_an_outcome(demo) -> None:
    manager, _ = demo
    manager.start("demo").result(30)
    result = call(manager, "fail", why="disk on fire")
    assert result.kind == "tool_error"
    assert "demo_fail" in result.text


def test_arguments_that_do_not_fit_the_schema_never_reach_the_server(demo) -> None:
    manager, _ = demo
    manager.start("demo").result(30)
    result = call(manager, "add", a="two")
    assert result.kind == "invalid_arguments"
    assert "required" in result.text or "integer" in result.text


def test_a_result_over_the_cap_is_cut_with_a_note(demo) -> None:
    manager, _ = demo
    manager.start("demo").result(30)
    result = call(manager, "big", size=1_500_000)
    assert result.kind == "ok" and result.truncated
    assert len(result.text.encode()) < 1_000_300
    assert "The result was cut: 1,000,000 of its 1,500,000 bytes" in result.text


def test_a_hanging_call_times_out_and_the_server_stays_usable(demo) -> None:
    manager, _ = demo
    manager.start("demo").result(30)
    started = time.monotonic()
    result = call(manager, "sleep", seconds=30)
    assert result.kind == "timeout"
    assert time.monotonic() - started < 10
    assert call(manager, "echo", text="still here").text == "still here"


def test_a_server_crashing_mid_call_says_so_with_its_stderr() -> None:
    events: list[ToolEvent] = []
    with ToolServerManager(ToolsConfig((stdio("c", "stdio"),)), on_event=events.append) as manager:
        manager.start("c").result(30)
        result = call(manager, "crash", server="c")
        assert result.kind == "server_crashed"
        assert "simulated fault" in result.text
        status = manager.status("c")
        assert status.state == "failed" and "simulated fault" in status.stderr_tail
        # the next call is an outcome too, until the user restarts the server
        info = manager.find_tool("c_add") or next(
            t for e in events if isinstance(e, ServerStatus) for t in e.tools if t.name == "add"
        )
        again = manager.call(info, ToolCall("c_add", {"a": 1, "b": 2})).result(10)
        assert again.kind == "server_failed"
        assert manager.restart("c").result(30).state == "ready"
        assert call(manager, "add", server="c", a=1, b=2).text == "3"


def test_start_failures_are_states_with_reasons() -> None:
    config = ToolsConfig(
        (
            ServerConfig("missing", command="no-such-mcp-server-command"),
            stdio("dies", "die"),
            stdio("hangs", "hang"),
            stdio("schema", "bad-schema"),
        )
    )
    started = time.monotonic()
    with ToolServerManager(config, start_timeout_s=3.0) as manager:
        statuses = {s.server: s for s in manager.start_all(timeout_s=30)}
    assert time.monotonic() - started < 20
    assert statuses["missing"].state == "failed"
    assert "'no-such-mcp-server-command' was not found" in statuses["missing"].message
    assert statuses["dies"].state == "failed"
    assert "DEMO_API_KEY is not set" in statuses["dies"].stderr_tail
    assert statuses["dies"].message == "it exited before it was ready"
    assert statuses["hangs"].state == "failed"
    assert "did not start within 3 s" in statuses["hangs"].message
    schema = statuses["schema"]
    assert schema.state == "ready" and [t.name for t in schema.tools] == ["fine"]
    assert "broken: left out" in schema.problems[0] and "JSON Schema" in schema.problems[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def test_a_streamable_http_server_on_loopback(http_server: str) -> None:
    config = ToolsConfig(
        (ServerConfig("web", transport="http", url=http_server, headers={"X-Team": "blue"}),)
    )
    with ToolServerManager(config) as manager:
        status = manager.start("web").result(30)
        assert status.state == "ready", status.message
        assert call(manager, "add", server="web", a=20, b=22).text == "42"
        assert call(manager, "fail", server="web").kind == "tool_error"


def test_an_http_server_that_is_not_there_fails_to_start() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    config = ToolsConfig((ServerConfig("gone", transport="http", url=url),))
    with ToolServerManager(config, start_timeout_s=5) as manager:
        status = manager.start("gone").result(30)
    assert status.state == "failed" and status.message
