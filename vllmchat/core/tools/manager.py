"""MCP servers on the official ``mcp`` SDK, in one background thread owned by the manager.

The SDK is asyncio (anyio): the manager runs one event loop in its own thread, and
callers on any thread get ``concurrent.futures.Future``s. A server starts lazily (on
the first call, or ``start``), within a timeout, and announces its state as
``ServerStatus`` events: starting, ready with its tools, failed with the tail of its
stderr. A call always ends in a ``ToolResult``: its result (cut at a size cap), the
tool's error, a timeout, a crashed or unavailable server; never a hang.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import httpx2

from vllmchat.core.tools.config import DEFAULT_START_TIMEOUT_S, ServerConfig, ToolsConfig
from vllmchat.core.tools.errors import CONNECTION_CLOSED, connection_closed, describe_error
from vllmchat.core.tools.events import (
    ServerStatus,
    ToolCall,
    ToolInfo,
    ToolResult,
    model_tool_name,
)
from vllmchat.core.tools.login_path import login_path
from vllmchat.core.tools.results import (
    RESULT_CAP_BYTES,
    arguments_problem,
    cap_text,
    result_text,
    schema_problem,
)

if TYPE_CHECKING:  # the SDK (a second and more to import) loads with the first server
    from mcp import Client

log = logging.getLogger(__name__)
STDERR_TAIL_CHARS = 2000
_MAX_TOOL_PAGES = 50


@dataclass
class _Running:
    """A started server: owned by the loop's thread."""

    config: ServerConfig
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    tools: dict[str, ToolInfo] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    errlog: Path | None = None

    def stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        try:
            with self.errlog.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - STDERR_TAIL_CHARS * 2))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text[-STDERR_TAIL_CHARS:].strip()


class ToolServerManager:
    """The configured servers, their states, and calls to their tools."""

    def __init__(
        self,
        config: ToolsConfig,
        *,
        on_event: Callable[[ServerStatus], None] | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        result_cap_bytes: int = RESULT_CAP_BYTES,
        path: str | None = None,
    ) -> None:
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.result_cap_bytes = result_cap_bytes
        self._on_event = on_event
        self._path = path
        self._lock = threading.Lock()
        self._status = {s.name: ServerStatus(s.name, "stopped") for s in config.servers}
        self._running: dict[str, _Running] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="vllmchat-mcp-")

    # -- any thread ------------------------------------------------------------------

    def status(self, name: str) -> ServerStatus:
        with self._lock:
            return self._status.get(name) or ServerStatus(name, "failed", message="not configured")

    def statuses(self) -> list[ServerStatus]:
        with self._lock:
            return list(self._status.values())

    def tools(self) -> list[ToolInfo]:
        """The tools of the servers that are ready, in config order."""
        return [t for s in self.statuses() if s.state == "ready" for t in s.tools]

    def find_tool(self, model_name: str) -> ToolInfo | None:
        return next((t for t in self.tools() if t.model_name == model_name), None)

    def start(self, name: str) -> Future[ServerStatus]:
        """Start ``name`` (if it is not started) off the caller's thread."""
        return asyncio.run_coroutine_threadsafe(self._start(name), self._ensure_loop())

    def start_all(self, timeout_s: float | None = None) -> list[ServerStatus]:
        """Start every enabled server at once and wait for each to be ready or failed."""
        futures = [self.start(s.name) for s in self.config.servers if not s.disabled]
        for future in futures:
            try:
                future.result(timeout=timeout_s)
            except Exception:
                log.exception("starting an MCP server")
        return self.statuses()

    def start_stopped(self, timeout_s: float | None = None) -> list[ServerStatus]:
        """Start the enabled servers not started yet (a failed one waits for ``restart``)."""
        futures = [
            self.start(s.name)
            for s in self.config.servers
            if not s.disabled and self.status(s.name).state == "stopped"
        ]
        for future in futures:
            try:
                future.result(timeout=timeout_s)
            except Exception:
                log.exception("starting an MCP server")
        return self.statuses()

    def restart(self, name: str) -> Future[ServerStatus]:
        """Stop ``name`` and start it again (a failed server stays failed until this)."""
        return asyncio.run_coroutine_threadsafe(self._restart(name), self._ensure_loop())

    def call(
        self, tool: ToolInfo, call: ToolCall, timeout_s: float | None = None
    ) -> Future[ToolResult]:
        """Call ``tool`` with ``call.arguments``; the future always holds a ``ToolResult``."""
        return asyncio.run_coroutine_threadsafe(
            self._call(tool, call, timeout_s), self._ensure_loop()
        )

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop every server and the loop's thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            self._tmp.cleanup()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(timeout_s)
        except Exception:
            log.exception("stopping MCP servers")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None
        self._tmp.cleanup()

    def __enter__(self) -> ToolServerManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="vllmchat-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _announce(self, status: ServerStatus) -> None:
        with self._lock:
            self._status[status.server] = status
        self._emit(status)

    def _emit(self, event: ServerStatus) -> None:
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("an MCP event handler failed")

    # -- the loop's thread -----------------------------------------------------------

    async def _start(self, name: str) -> ServerStatus:
        config = self.config.server(name)
        if config is None:
            return ServerStatus(name, "failed", message=f"no server named {name!r} is configured")
        running = self._running.get(name)
        if running is None or (running.task is not None and running.task.done()):
            running = _Running(config)
            self._running[name] = running
            running.task = asyncio.create_task(self._hold(running))
        await running.ready.wait()
        return self.status(name)

    async def _restart(self, name: str) -> ServerStatus:
        await self._stop(name)
        return await self._start(name)

    async def _stop(self, name: str) -> None:
        running = self._running.pop(name, None)
        if running is not None and running.task is not None:
            running.stop.set()
            await asyncio.wait({running.task}, timeout=10.0)

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(n) for n in list(self._running)))

    async def _env(self, config: ServerConfig) -> dict[str, str]:
        """The server's environment: the login shell's PATH (asked off the loop), then its env."""
        path = self._path if self._path is not None else await asyncio.to_thread(login_path)
        return {"PATH": path, **config.env}

    async def _connect(
        self, config: ServerConfig, running: _Running, stack: AsyncExitStack
    ) -> Client:
        from mcp import Client, StdioServerParameters
        from mcp.client.sse import sse_client
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        if config.transport == "stdio":
            env = await self._env(config)
            command = shutil.which(config.command, path=env["PATH"])
            if command is None:
                raise FileNotFoundError(
                    f"the command {config.command!r} was not found"
                    + ("" if os.sep in config.command else " on the login shell's PATH")
                )
            running.errlog = (
                Path(self._tmp.name)
                / f"{model_tool_name(config.name, 'stderr')}-{time.time_ns()}.log"
            )
            errlog: TextIO = stack.enter_context(running.errlog.open("w", encoding="utf-8"))
            params = StdioServerParameters(
                command=command, args=list(config.args), env=env, cwd=config.cwd
            )
            client = Client(stdio_client(params, errlog=errlog))
        elif config.transport == "sse":
            client = Client(sse_client(config.url, headers=dict(config.headers)))
        else:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=300.0)
                )
            )
            client = Client(streamable_http_client(config.url, http_client=http))
        return await stack.enter_async_context(client)

    async def _list_tools(self, client: Client, running: _Running) -> list[str]:
        problems: list[str] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                problem = schema_problem(tool.input_schema)
                if problem:
                    problems.append(f"{tool.name}: left out, {problem}")
                    continue
                info = ToolInfo(
                    running.config.name, tool.name, tool.description or "", tool.input_schema
                )
                running.tools[tool.name] = info
            cursor = page.next_cursor
            if cursor is None:
                break
        return problems

    async def _hold(self, running: _Running) -> None:
        """Start one server, keep it until asked to stop, and say how it went."""
        name = running.config.name
        self._announce(ServerStatus(name, "starting"))
        try:
            with anyio.CancelScope() as scope:
                scope.deadline = anyio.current_time() + self.start_timeout_s
                async with AsyncExitStack() as stack:
                    client = await self._connect(running.config.with_secrets(), running, stack)
                    problems = await self._list_tools(client, running)
                    scope.deadline = math.inf
                    running.client = client
                    self._announce(
                        ServerStatus(
                            name, "ready", tuple(running.tools.values()), problems=tuple(problems)
                        )
                    )
                    running.ready.set()
                    await running.stop.wait()
            if scope.cancelled_caught and not running.ready.is_set():
                self._fail(running, f"did not start within {self.start_timeout_s:g} s")
        except Exception as exc:
            if not running.stop.is_set():
                closed = connection_closed(exc)
                self._fail(
                    running, "it exited before it was ready" if closed else describe_error(exc)
                )
        finally:
            running.client = None
            running.ready.set()
            if self.status(name).state in ("ready", "starting"):
                self._announce(ServerStatus(name, "stopped"))

    def _fail(self, running: _Running, message: str) -> None:
        self._announce(
            ServerStatus(
                running.config.name, "failed", message=message, stderr_tail=running.stderr_tail()
            )
        )

    async def _call(self, tool: ToolInfo, call: ToolCall, timeout_s: float | None) -> ToolResult:
        from mcp import MCPError  # loaded with the server that gave this tool

        started = time.monotonic()

        def result(kind: Any, text: str, truncated: bool = False) -> ToolResult:
            return ToolResult(call, kind, text, truncated, time.monotonic() - started)

        problem = arguments_problem(tool.input_schema, call.arguments)
        if problem:
            return result(
                "invalid_arguments", f"The arguments do not fit {tool.model_name}: {problem}"
            )
        status = self.status(tool.server)
        if status.state != "failed":
            status = await self._start(tool.server)
        running = self._running.get(tool.server)
        client = running.client if running else None
        if status.state != "ready" or running is None or client is None:
            reason = status.message or status.state
            return result(
                "server_failed", f"The tool server {tool.server!r} is not available: {reason}"
            )
        config = running.config
        limit = timeout_s if timeout_s is not None else config.timeout_s
        with anyio.move_on_after(limit) as scope:
            try:
                answer = await client.call_tool(tool.name, dict(call.arguments))
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED:
                    return result("tool_error", f"{tool.model_name} failed: {exc.error.message}")
                return self._crashed(running, result)
            except Exception as exc:
                if running.stop.is_set() or isinstance(
                    exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)
                ):
                    return self._crashed(running, result)
                return result("tool_error", f"{tool.model_name} failed: {describe_error(exc)}")
        if scope.cancelled_caught:
            return result(
                "timeout",
                f"{tool.model_name} did not answer within {limit:g} s; the call was cancelled.",
            )
        text, cut = cap_text(
            result_text(answer.content, answer.structured_content), self.result_cap_bytes
        )
        if answer.is_error:
            return result("tool_error", f"{tool.model_name} reported an error: {text}", cut)
        return result("ok", text, cut)

    def _crashed(self, running: _Running, result: Callable[..., ToolResult]) -> ToolResult:
        tail = running.stderr_tail()
        name = running.config.name
        last = tail.splitlines()[-1][-300:] if tail else ""
        message = "the server stopped during the call" + (
            f"; its last output: {last}" if last else ""
        )
        running.stop.set()
        self._announce(
            ServerStatus(name, "failed", message="crashed during a call", stderr_tail=tail)
        )
        return result("server_crashed", f"The tool server {name!r} crashed: {message}")
