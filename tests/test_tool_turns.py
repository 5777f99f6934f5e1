"""Tool turns through the real demo model and a real MCP server (stdio).

SmolLM2's template has no tool format, so its call is grammar-constrained
(``tool_choice="required"``); a model that repeats one call is recorded output
(the small model cannot be made to loop on purpose).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from vllmchat.bench.tools.tools_bench import RecordedEngine
from vllmchat.core.app.tools.turns import ToolTurn, ToolTurnDone
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.tools.approval import ApprovalPolicy
from vllmchat.core.tools.events import Approval, ApprovalNeeded, ToolCallFinished
from vllmchat.core.tools.manager import ToolServerManager

GREEDY = SamplingSettings(temperature=0.0, max_tokens=48, seed=7)


@pytest.fixture
def demo_client(make_client, demo_model: Path):
    client = make_client()
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=2048, n_threads=2))
    return client


def drive(
    turn: Generator[Any, None, ToolTurnDone], answer: Approval
) -> tuple[list[Any], ToolTurnDone]:
    events: list[Any] = []
    try:
        while True:
            event = next(turn)
            events.append(event)
            if isinstance(event, ApprovalNeeded):
                event.answer.set_result(answer)
    except StopIteration as stop:
        return events, stop.value


def test_a_constrained_call_round_trips_and_the_tool_step_prefills_only_the_result(
    demo_client, manager: ToolServerManager
) -> None:
    tools = [t for t in manager.tools() if t.name == "add"]
    run = lambda tool, call: manager.call(tool, call).result(60)  # noqa: E731
    turn = ToolTurn(demo_client, tools, run, ApprovalPolicy(), "c1", tool_choice="required")
    events, done = drive(
        turn.run([{"role": "user", "content": "What is 2 plus 40?"}], GREEDY), Approval("once")
    )
    asked = [e for e in events if isinstance(e, ApprovalNeeded)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(asked) == 1 and asked[0].call.name == "demo_add"
    assert finished[0].result.kind == "ok"
    assert done.error is None and len(done.step_stats) == 2
    call_step, answer_step = done.step_stats
    around = answer_step.prompt_tokens - call_step.prompt_tokens - call_step.decode_tokens
    assert 0 < answer_step.tokens_prefilled <= 1.2 * around
    assert answer_step.tokens_reused >= call_step.prompt_tokens


def test_a_denied_call_tells_the_model_why(demo_client, manager: ToolServerManager) -> None:
    tools = [t for t in manager.tools() if t.name == "add"]
    ran: list[object] = []
    turn = ToolTurn(
        demo_client,
        tools,
        lambda tool, call: ran.append(call) or manager.call(tool, call).result(60),
        ApprovalPolicy(),
        "c2",
        tool_choice="required",
    )
    _, done = drive(
        turn.run([{"role": "user", "content": "Add 1 and 1."}], GREEDY),
        Approval("deny", "not now"),
    )
    assert ran == []
    assert done.results[0].kind == "denied"
    assert any("not now" in m["content"] for m in done.added)


def test_a_repeated_call_is_stopped(manager: ToolServerManager) -> None:
    tools = [t for t in manager.tools() if t.name == "add"]
    engine = RecordedEngine(None, '{"name": "demo_add", "arguments": {"a": 1, "b": 2}}')
    policy = ApprovalPolicy(always=["demo_add"])
    run = lambda tool, call: manager.call(tool, call).result(60)  # noqa: E731
    turn = ToolTurn(engine, tools, run, policy, "c3", max_steps=3)
    _, done = drive(turn.run([{"role": "user", "content": "Add."}]), Approval("once"))
    assert [r.kind for r in done.results] == ["ok", "repeated", "repeated", "step_limit"]
    assert done.loop_stopped


def test_a_result_too_large_for_the_context_is_cut_to_fit_with_a_note(
    demo_client, manager: ToolServerManager
) -> None:
    """The call is recorded output on the real model's info (n_ctx 2048): the demo model
    does not pick a result's size on cue."""
    tools = [t for t in manager.tools() if t.name == "big"]
    engine = RecordedEngine(demo_client.info, '{"name": "demo_big", "arguments": {"size": 50000}}')
    run = lambda tool, call: manager.call(tool, call).result(60)  # noqa: E731
    turn = ToolTurn(engine, tools, run, ApprovalPolicy(always=["demo_big"]), "c5", max_steps=1)
    events, done = drive(turn.run([{"role": "user", "content": "Big."}]), Approval("once"))
    first = done.results[0]
    assert first.kind == "ok" and first.truncated
    assert first.text.startswith("x" * 1024) and "x" * 1025 not in first.text
    assert "cut to 1,024 of its 50,000 characters to fit the context of 2,048" in first.text
    shown = next(e.result for e in events if isinstance(e, ToolCallFinished))
    assert shown == first  # what the user sees is what the model was shown


def test_a_call_that_cannot_be_read_is_shown_and_a_model_repeating_it_stops(
    manager: ToolServerManager,
) -> None:
    """Recorded output: a model writing the same broken call at every step."""
    tools = [t for t in manager.tools() if t.name == "add"]
    engine = RecordedEngine(
        None, '<tool_call>{"name": "demo_add", "arguments": {"a": 1,</tool_call>'
    )
    run = lambda tool, call: manager.call(tool, call).result(60)  # noqa: E731
    turn = ToolTurn(engine, tools, run, ApprovalPolicy(), "c6", max_steps=3)
    events, done = drive(turn.run([{"role": "user", "content": "Add."}]), Approval("once"))
    shown = [e.result.kind for e in events if isinstance(e, ToolCallFinished)]
    assert shown == ["malformed_call"] * 3 + ["step_limit"]
    assert "not valid JSON" in done.results[0].text and done.loop_stopped
