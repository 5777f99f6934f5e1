"""``vllmchat bench tools``: a tool round trip through the demo model and a loopback MCP server.

- ``tool_roundtrip_ok``: the model's call (grammar-constrained: the demo model's
  template has no tool format) reaches the server, and the model answers from the result;
- ``prefill_per_tool_step_over_result``: tokens prefilled for the step after the call,
  over the tokens the result and the template's markup around it add to the prompt;
- ``schema_prefix_reused``: the next turn re-prefills none of the tool descriptions;
- ``calls_without_approval``: calls that ran without the user's approval (each one asked);
- ``loop_stopped``: a model that repeats one call (recorded output) is stopped.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from typing import Any

from vllmchat.core.app.tools.turns import Message, ToolTurn, ToolTurnDone
from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import DoneEvent, Event, StatsEvent, TurnStats
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.tools.approval import ApprovalPolicy
from vllmchat.core.tools.config import ServerConfig, ToolsConfig
from vllmchat.core.tools.events import Approval, ApprovalNeeded, ToolCall, ToolInfo, ToolResult
from vllmchat.core.tools.manager import ToolServerManager
from vllmchat.core.tools.prompting import fallback_system_prompt

SAMPLING = SamplingSettings(temperature=0.0, max_tokens=64, seed=7)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the loopback MCP server did not listen on port {port}")


class _Counter:
    """Approves every call it is asked about, and counts calls and approvals."""

    def __init__(self, manager: ToolServerManager) -> None:
        self.manager = manager
        self.asked = 0
        self.ran = 0

    def run_call(self, tool: ToolInfo, call: ToolCall) -> ToolResult:
        self.ran += 1
        return self.manager.call(tool, call).result(timeout=120)

    def drive(self, turn: Generator[Any, None, ToolTurnDone]) -> ToolTurnDone:
        try:
            while True:
                event = next(turn)
                if isinstance(event, ApprovalNeeded):
                    self.asked += 1
                    event.answer.set_result(Approval("once"))
        except StopIteration as stop:
            done: ToolTurnDone = stop.value
            return done


class RecordedEngine:
    """A model that always writes the same call (recorded output), on the real model's info."""

    def __init__(self, info: ModelInfo | None, reply: str) -> None:
        self._info, self.reply = info, reply

    @property
    def info(self) -> ModelInfo | None:
        return self._info

    def chat(
        self,
        messages: Sequence[Message],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = PLAIN,
    ) -> Iterator[Event]:
        stats = TurnStats(stop_reason="eos")
        yield StatsEvent(stats)
        yield DoneEvent(self.reply, "eos", stats)


def _figures(
    client: EngineClient, manager: ToolServerManager, tools: list[ToolInfo]
) -> dict[str, Any]:
    counter = _Counter(manager)
    policy = ApprovalPolicy()
    weather = [t for t in tools if t.name == "weather"]
    turn = ToolTurn(client, weather, counter.run_call, policy, "bench", tool_choice="required")
    question: Message = {"role": "user", "content": "What is the weather in Lisbon today?"}
    first = counter.drive(turn.run([question], SAMPLING))
    ok = (
        first.error is None
        and len(first.step_stats) >= 2
        and any(r.ok and "Lisbon" in r.text for r in first.results)
        and bool(first.text.strip())
    )
    result: dict[str, Any] = {"tool_roundtrip_ok": int(ok), "model_steps": len(first.step_stats)}
    if len(first.step_stats) >= 2:
        call_step, answer_step = first.step_stats[:2]
        around = answer_step.prompt_tokens - call_step.prompt_tokens - call_step.decode_tokens
        result["tool_step_prefilled"] = answer_step.tokens_prefilled
        result["tool_step_result_and_markup_tokens"] = around
        result["prefill_per_tool_step_over_result"] = round(
            answer_step.tokens_prefilled / max(1, around), 3
        )
    history = [question, *first.added, {"role": "user", "content": "And tomorrow?"}]
    again = ToolTurn(client, weather, counter.run_call, policy, "bench", max_steps=1)
    second = counter.drive(again.run(history, SAMPLING))
    schema_tokens = len(client.tokenize(fallback_system_prompt(weather)))
    reused = second.step_stats[0].tokens_reused if second.step_stats else 0
    result["schema_tokens"] = schema_tokens
    result["turn2_tokens_reused"] = reused
    result["schema_prefix_reused"] = int(reused >= schema_tokens)

    add = [t for t in tools if t.name == "add"]
    looping = RecordedEngine(
        client.info, json.dumps({"name": add[0].model_name, "arguments": {"a": 1, "b": 2}})
    )
    loop = ToolTurn(looping, add, counter.run_call, ApprovalPolicy(), "bench-loop", max_steps=4)
    stopped = counter.drive(loop.run([{"role": "user", "content": "Add 1 and 2."}], SAMPLING))
    kinds = [r.kind for r in stopped.results]
    result["loop_outcomes"] = kinds
    result["loop_stopped"] = int(stopped.loop_stopped and "repeated" in kinds)
    result["calls_without_approval"] = counter.ran - counter.asked
    return result


def run(*, model: str | None = None, quick: bool = False) -> dict[str, Any]:
    from vllmchat.core.demo_model import demo_model_path

    settings = LoadSettings(model_path=model or str(demo_model_path()), n_ctx=4096, n_threads=2)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "vllmchat.bench.tools.mcp_loopback", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = EngineClient()
    try:
        _wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        with ToolServerManager(
            ToolsConfig((ServerConfig("loop", transport="http", url=url),))
        ) as manager:
            status = manager.start("loop").result(timeout=60)
            if status.state != "ready":
                raise RuntimeError(f"the loopback MCP server failed: {status.message}")
            client.load(settings)
            return {
                "model": settings.model_path.rsplit("/", 1)[-1],
                **_figures(client, manager, list(status.tools)),
            }
    finally:
        client.close()
        server.terminate()
        server.wait(10)
