"""Tool calls in the common formats, and the approval and loop rules around them."""

from __future__ import annotations

import threading

import pytest

from vllmchat.core.chat_format import render_segments
from vllmchat.core.chat_templates import CHATML, LLAMA3
from vllmchat.core.tools.approval import ApprovalPolicy, TurnGuard, tool_step
from vllmchat.core.tools.calls import parse_reply
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ToolCall,
    ToolCallFinished,
    ToolInfo,
    ToolResult,
)
from vllmchat.core.tools.prompting import call_schema, template_supports_tools, tool_format

ADD = {"a": 2, "b": 3}


@pytest.mark.parametrize(
    ("reply", "fmt"),
    [
        (
            'Sure.\n<tool_call>\n{"name": "demo_add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
            "hermes",
        ),
        (
            "<tool_call>\n<function=demo_add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n3\n"
            "</parameter>\n</function>\n</tool_call>",
            "hermes",
        ),
        ('<|python_tag|>{"name": "demo_add", "parameters": {"a": 2, "b": 3}}', "llama3"),
        ('{"name": "demo_add", "parameters": {"a": 2, "b": 3}}', "json"),
        (
            '[TOOL_CALLS][{"name": "demo_add", "arguments": {"a": 2, "b": 3}, "id": "abc123xyz"}]',
            "mistral",
        ),
        ('[TOOL_CALLS]demo_add[ARGS]{"a": 2, "b": 3}', "mistral"),
        (
            "<|channel|>commentary to=functions.demo_add <|constrain|>json"
            '<|message|>{"a": 2, "b": 3}<|call|>',
            "gpt-oss",
        ),
        ('<function=demo_add>{"a": 2, "b": 3}</function>', "llama3.1"),
        ('{"name": "demo_add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}', "json"),
    ],
)
def test_each_format_gives_the_same_typed_call(reply: str, fmt: str) -> None:
    parsed = parse_reply(reply)
    assert parsed.format == fmt
    assert parsed.malformed == ()
    assert [(c.name, dict(c.arguments)) for c in parsed.calls] == [("demo_add", ADD)]


def test_text_without_calls_is_left_alone() -> None:
    parsed = parse_reply("The answer is {not a call}.")
    assert (parsed.content, parsed.calls, parsed.malformed) == (
        "The answer is {not a call}.",
        (),
        (),
    )


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "demo_add", "arguments": {"a": 2,}}</tool_call>',
        '<|python_tag|>{"name": "demo_add", "parameters": {"a": 2',
        '[TOOL_CALLS][{"name": "demo_add", "arguments": {"a": }]',
        '<tool_call>{"arguments": {}}</tool_call>',
    ],
)
def test_malformed_calls_are_reported_not_dropped(reply: str) -> None:
    parsed = parse_reply(reply)
    assert parsed.calls == () and len(parsed.malformed) == 1
    assert parsed.has_calls


def test_two_calls_in_one_reply_keep_their_order() -> None:
    reply = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>'
    )
    assert [c.name for c in parse_reply(reply).calls] == ["a", "b"]


QWEN_LIKE = (
    "{%- if tools %}{{ '<|im_start|>system\\n# Tools\\n<tools>' }}"
    "{%- for tool in tools %}{{ tool | tojson }}{%- endfor %}{{ '</tools><|im_end|>\\n' }}"
    "{%- endif %}" + CHATML
)


def test_tool_support_is_probed_by_rendering() -> None:
    assert template_supports_tools(QWEN_LIKE)
    assert not template_supports_tools(CHATML)
    assert not template_supports_tools(LLAMA3)
    assert (tool_format(QWEN_LIKE), tool_format(CHATML)) == ("hermes", "")


def test_the_template_renders_the_tools_list_and_tool_results() -> None:
    tools = [ToolInfo("demo", "add", "Add two integers.", {"type": "object"}).openai_schema()]
    messages = [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": '<tool_call>{"name": "demo_add"}</tool_call>'},
        {"role": "tool", "content": "5", "tool_call_id": "call_0"},
    ]
    segments = render_segments(QWEN_LIKE, messages, bos_token="", eos_token="", tools=tools)
    markup = "".join(s.text for s in segments if s.is_markup)
    assert '"name": "demo_add"' in markup and "Add two integers." in markup
    assert [s.text for s in segments if not s.is_markup] == [m["content"] for m in messages]
    plain = render_segments(QWEN_LIKE, messages[:1], bos_token="", eos_token="")
    assert "demo_add" not in "".join(s.text for s in plain)


def test_the_call_schema_names_each_tool() -> None:
    tools = [ToolInfo("demo", "add", "", {"type": "object"}), ToolInfo("demo", "echo")]
    schema = call_schema(tools)
    assert [o["properties"]["name"]["const"] for o in schema["oneOf"]] == ["demo_add", "demo_echo"]


# -- approval ------------------------------------------------------------------------

TOOL = ToolInfo("demo", "add", "Add.", {"type": "object"})


def drive(step, answer: Approval | None = None) -> tuple[list[object], ToolResult]:
    """Run a tool step as a front end would: answer an approval prompt when one comes."""
    events: list[object] = []
    try:
        while True:
            event = next(step)
            events.append(event)
            if isinstance(event, ApprovalNeeded) and answer is not None:
                event.answer.set_result(answer)
    except StopIteration as stop:
        return events, stop.value


def step(call: ToolCall, policy: ApprovalPolicy, guard: TurnGuard, ran: list[ToolCall], **kw):
    def run(tool: ToolInfo, c: ToolCall) -> ToolResult:
        ran.append(c)
        return ToolResult(c, "ok", "5")

    return tool_step(
        call,
        find_tool=lambda name: TOOL if name == "demo_add" else None,
        run=run,
        policy=policy,
        conversation="conv-1",
        guard=guard,
        **kw,
    )


def test_every_call_waits_for_approval_and_once_means_once() -> None:
    policy, ran = ApprovalPolicy(), []
    events, result = drive(
        step(ToolCall("demo_add", ADD), policy, TurnGuard(), ran), Approval("once")
    )
    assert isinstance(events[0], ApprovalNeeded) and isinstance(events[-1], ToolCallFinished)
    assert result.kind == "ok" and len(ran) == 1
    assert policy.needs_approval("conv-1", "demo_add")


def test_conversation_and_always_approvals_are_remembered() -> None:
    policy, ran = ApprovalPolicy(), []
    drive(step(ToolCall("demo_add", ADD), policy, TurnGuard(), ran), Approval("conversation"))
    assert not policy.needs_approval("conv-1", "demo_add")
    assert policy.needs_approval("conv-2", "demo_add")
    events, _ = drive(step(ToolCall("demo_add", {"a": 1, "b": 1}), policy, TurnGuard(), ran))
    assert not any(isinstance(e, ApprovalNeeded) for e in events)
    policy.record("conv-2", "demo_add", Approval("always"))
    assert not policy.needs_approval("conv-9", "demo_add")
    assert policy.always == {"demo_add"}


def test_a_denial_carries_its_reason_to_the_model_and_runs_nothing() -> None:
    ran: list[ToolCall] = []
    _, result = drive(
        step(ToolCall("demo_add", ADD), ApprovalPolicy(), TurnGuard(), ran),
        Approval("deny", "use mental arithmetic"),
    )
    assert result.kind == "denied" and "use mental arithmetic" in result.text
    assert ran == []


def test_a_stopped_turn_stops_waiting_for_approval() -> None:
    stop = threading.Event()
    gen = step(
        ToolCall("demo_add", ADD), ApprovalPolicy(), TurnGuard(), [], should_stop=stop.is_set
    )
    assert isinstance(next(gen), ApprovalNeeded)
    stop.set()
    finished = next(gen)
    assert isinstance(finished, ToolCallFinished) and finished.result.kind == "denied"


def test_unknown_tools_repeats_and_the_step_limit_are_outcomes() -> None:
    policy, guard, ran = ApprovalPolicy(always=["demo_add"]), TurnGuard(max_steps=3), []
    assert drive(step(ToolCall("nope", {}), policy, guard, ran))[1].kind == "unknown_tool"
    assert drive(step(ToolCall("demo_add", ADD), policy, guard, ran))[1].kind == "ok"
    repeated = drive(step(ToolCall("demo_add", {"b": 3, "a": 2}), policy, guard, ran))[1]
    assert repeated.kind == "repeated"
    limited = drive(step(ToolCall("demo_add", {"a": 9, "b": 9}), policy, guard, ran))[1]
    assert limited.kind == "step_limit" and guard.stopped
    assert len(ran) == 1


def test_a_servers_streamed_calls_become_call_text_and_go_back_in_the_apis_shape() -> None:
    """The pieces are shaped as the openai client's deltas (plain objects with its fields)."""
    from types import SimpleNamespace as Delta

    from vllmchat.core.engine.remote.tools import StreamedCalls, openai_messages

    calls = StreamedCalls()
    calls.add([Delta(index=0, id="call_9", function=Delta(name="demo_add", arguments='{"a": 2,'))])
    calls.add([Delta(index=0, id=None, function=Delta(name=None, arguments=' "b": 3}'))])
    text = calls.text()
    parsed = parse_reply(text)
    assert [(c.name, dict(c.arguments), c.call_id) for c in parsed.calls] == [
        ("demo_add", ADD, "call_9")
    ]
    sent = openai_messages(
        [
            {"role": "assistant", "content": text},
            {"role": "tool", "content": "5", "tool_call_id": "call_9"},
        ]
    )
    assert sent[0]["tool_calls"][0]["function"] == {
        "name": "demo_add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert sent[1] == {"role": "tool", "content": "5", "tool_call_id": "call_9"}
    broken = StreamedCalls()
    broken.add([Delta(index=0, id="x", function=Delta(name="demo_add", arguments='{"a": '))])
    assert parse_reply(broken.text()).malformed
