"""The MCP tools of the application layer: one owner for the servers, the approvals and
the calls, announcing each step as an event of ``core/tools/events.py``.

``use`` reads a config; its servers start when first needed, on the service's own
thread (the MCP SDK's loop), and each state is announced (``ServerStatus``). The
tools the user allowed for a conversation, or always, are kept here (always: in
``mcp-approved.json`` beside the config). A turn's calls wait for ``answer`` (an
``ApprovalNeeded`` announced), then run on the service's thread (``ToolCallStarted``,
``ToolCallFinished``). A turn that goes without tools it was meant to have says so
once per cause (``ToolsUnavailable``).

Front ends ``subscribe``; a handler runs on the thread the event happens on (a turn's,
or the service's), so a window hands it to its GUI thread through a signal.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import cast

from vllmchat.core.app.tools.turns import ToolChoice, ToolEngine, ToolTurn
from vllmchat.core.engine.events import Event
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.tools.approval import DEFAULT_MAX_STEPS, ApprovalPolicy
from vllmchat.core.tools.approved import load_approved, save_approved
from vllmchat.core.tools.config import (
    DEFAULT_START_TIMEOUT_S,
    ConfigError,
    ToolsConfig,
    load_config,
)
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ApprovalRevoked,
    ServerStatus,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolEvent,
    ToolInfo,
    ToolResult,
    ToolsConfigProblem,
    ToolServiceEvent,
)
from vllmchat.core.tools.manager import ToolServerManager
from vllmchat.core.tools.unavailable import unavailable

_log = logging.getLogger(__name__)
Handler = Callable[[ToolServiceEvent], None]
TurnStream = Callable[
    [list[dict[str, str]], SamplingSettings, Sequence[bytes]], Iterator[Event | ToolEvent]
]
_ANNOUNCED = (ApprovalNeeded, ToolCallFinished)  # a turn's steps, told to the subscribers


class ToolsService:
    """The configured MCP servers, the approvals, and each call, announced."""

    def __init__(
        self, *, start_timeout_s: float = DEFAULT_START_TIMEOUT_S, path: str | None = None
    ) -> None:
        """``path``: the servers' PATH (default: the login shell's)."""
        self.config = ToolsConfig()
        self.config_file: Path | None = None
        self.policy = ApprovalPolicy()
        self.tool_choice: ToolChoice = "auto"
        self._start_timeout_s = start_timeout_s
        self._path = path
        self._manager: ToolServerManager | None = None
        self._handlers: list[Handler] = []
        self._lock = threading.Lock()
        self._told: set[str] = set()  # the causes of ``ToolsUnavailable`` already said

    # -- subscribers ---------------------------------------------------------------------
    def subscribe(self, handler: Handler) -> None:
        with self._lock:
            self._handlers.append(handler)

    def unsubscribe(self, handler: Handler) -> None:
        with self._lock:
            if handler in self._handlers:
                self._handlers.remove(handler)

    def _announce(self, event: ToolServiceEvent) -> None:
        with self._lock:
            handlers = list(self._handlers)
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                _log.exception("a tools event handler failed")

    # -- the config ----------------------------------------------------------------------
    def use(
        self,
        config_file: Path | None,
        *,
        must_exist: bool = False,
        tool_choice: ToolChoice = "auto",
    ) -> ToolsConfigProblem | None:
        """Offer the servers of ``config_file`` from the next turn on (None: no tools);
        ``must_exist``: the user named the file. A config that cannot be used leaves the
        last one in use and is announced (and returned) as ``ToolsConfigProblem``."""
        self.tool_choice = tool_choice
        if config_file is None:
            self.config_file = None
            self._swap(ToolsConfig())
            return None
        try:
            config = load_config(config_file, must_exist=must_exist)
        except ConfigError as exc:
            problem = ToolsConfigProblem(str(config_file), str(exc))
            self._announce(problem)
            return problem
        if config_file != self.config_file:
            self.policy = ApprovalPolicy(load_approved(config_file))
            self.config_file = config_file
        if config != self.config or (self._manager is None and self.servers()):
            self._swap(config)
        return None

    def check(self, config_file: Path, *, must_exist: bool = False) -> ToolsConfigProblem | None:
        """Why ``config_file`` cannot be used (None: it can), without using it; any thread."""
        try:
            load_config(config_file, must_exist=must_exist)
        except ConfigError as exc:
            return ToolsConfigProblem(str(config_file), str(exc))
        return None

    def _swap(self, config: ToolsConfig) -> None:
        old, self._manager = self._manager, None
        self.config = config
        self._told.clear()
        if any(not s.disabled for s in config.servers):
            self._manager = ToolServerManager(
                config,
                on_event=self._announce,
                start_timeout_s=self._start_timeout_s,
                path=self._path,
            )
        if old is not None:
            old.close()

    @property
    def active(self) -> bool:
        """Some server is configured and enabled: turns offer tools."""
        return self._manager is not None

    # -- the servers (any thread) --------------------------------------------------------
    def servers(self) -> list[str]:
        """The enabled servers' names, in config order."""
        return [s.name for s in self.config.servers if not s.disabled]

    def statuses(self) -> list[ServerStatus]:
        manager = self._manager
        return manager.statuses() if manager is not None else []

    def tools(self) -> list[ToolInfo]:
        """The ready servers' tools, in config order."""
        manager = self._manager
        return manager.tools() if manager is not None else []

    def start_stopped(self, timeout_s: float | None = None) -> list[ServerStatus]:
        """Start the servers not started yet and wait for each (a failed one waits for
        ``restart``); on the caller's thread, while the service's starts them."""
        manager = self._manager
        return manager.start_stopped(timeout_s) if manager is not None else []

    def start_all(self, timeout_s: float | None = None) -> list[ServerStatus]:
        """Start every server (a failed one again) and wait for each."""
        manager = self._manager
        return manager.start_all(timeout_s) if manager is not None else []

    def start_in_background(self) -> None:
        """Start the servers not started yet; each state is announced."""
        manager = self._manager
        if manager is not None:
            for status in manager.statuses():
                if status.state == "stopped":
                    manager.start(status.server)

    def restart(self, name: str) -> Future[ServerStatus]:
        """Stop ``name`` and start it again."""
        manager = self._manager
        if manager is not None:
            return manager.restart(name)
        done: Future[ServerStatus] = Future()
        done.set_result(ServerStatus(name, "failed", message="no MCP servers are configured"))
        return done

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop every server and the service's thread."""
        old, self._manager = self._manager, None
        if old is not None:
            old.close(timeout_s=timeout_s)

    # -- approvals (intents) -------------------------------------------------------------
    def answer(self, event: ApprovalNeeded, approval: Approval) -> str:
        """The user's answer to a waiting call; "always" is kept in ``mcp-approved.json``.
        Returns why it could not be kept ("" when it was, or nothing was to keep)."""
        if event.answer.done():
            return ""
        failed = ""
        if approval.decision == "always" and self.config_file is not None:
            failed = save_approved(self.config_file, self.policy.always | {event.call.name})
        event.answer.set_result(approval)
        return failed

    def revoke(self, name: str) -> ApprovalRevoked:
        """A tool always allowed asks before each call again (``mcp-approved.json``)."""
        was_always = name in self.policy.always
        self.policy.revoke(name)
        failed = ""
        if was_always and self.config_file is not None:
            failed = save_approved(self.config_file, self.policy.always)
        event = ApprovalRevoked(name, was_always, failed)
        self._announce(event)
        return event

    # -- turns ---------------------------------------------------------------------------
    def turn_stream(
        self,
        engine: object,
        conversation: str,
        should_stop: Callable[[], bool],
        *,
        offered: Callable[[], Sequence[ToolInfo]] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> TurnStream:
        """A chat session's turn with these tools (the servers start at the first);
        ``offered``: the tools to offer of them, asked at each turn (default: all)."""

        def stream(
            prompt: list[dict[str, str]], sampling: SamplingSettings, images: Sequence[bytes] = ()
        ) -> Iterator[Event | ToolEvent]:
            self.start_stopped()
            tools = list(offered()) if offered is not None else self.tools()
            self._tell_unavailable(tools)
            turn = ToolTurn(
                cast(ToolEngine, engine),
                tools,
                self._run_call,
                self.policy,
                conversation,
                max_steps=max_steps,
                tool_choice=self.tool_choice,
                should_stop=should_stop,
            )
            for event in turn.run(prompt, sampling, images):
                yield event  # the session stores the steps; then the subscribers hear
                if isinstance(event, _ANNOUNCED):
                    self._announce(event)

        return stream

    def _run_call(self, tool: ToolInfo, call: ToolCall) -> ToolResult:
        """An allowed call, run on the service's thread (the turn waits for it)."""
        manager = self._manager
        if manager is None:
            message = f"The tool server {tool.server!r} is not configured any more."
            return ToolResult(call, "server_failed", message)
        self._announce(ToolCallStarted(call, tool))
        return manager.call(tool, call).result()

    def _tell_unavailable(self, offered: Sequence[ToolInfo]) -> None:
        """Say once per cause that this turn goes without tools it was meant to have."""
        enabled = set(self.servers())
        statuses = [s for s in self.statuses() if s.server in enabled]
        event, self._told = unavailable(statuses, offered, self.tool_choice, self._told)
        if event is not None:
            self._announce(event)


def try_servers(
    config: ToolsConfig, *, start_timeout_s: float = DEFAULT_START_TIMEOUT_S
) -> list[ServerStatus]:
    """Start every server of ``config``, wait for each, and stop them again: their states
    (for a config being edited, or ``vllmchat tools list``)."""
    with ToolServerManager(config, start_timeout_s=start_timeout_s) as manager:
        return manager.start_all()
