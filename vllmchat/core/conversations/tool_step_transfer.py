"""A conversation's tool steps in its exports: Markdown lines under each reply, the
JSON export's ``tool_steps`` list, and read back on import; with them the steps as the
model was given them (``tool_prompts``) and the conversation's tool pick."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast, get_args

from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.store.tool_prompts import StepPrompt, ToolPickStore, ToolPromptList
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.tools.events import OutcomeKind, ToolCall, ToolResult

MARKDOWN_RESULT_CHARS = 400


def steps_markdown(results: Sequence[ToolResult]) -> list[str]:
    """A reply's calls, quoted above its text: the call, how it ended, the result."""
    lines: list[str] = []
    for r in results:
        arguments = json.dumps(dict(r.call.arguments), ensure_ascii=False)
        text = r.text.strip()
        if len(text) > MARKDOWN_RESULT_CHARS:
            text = text[:MARKDOWN_RESULT_CHARS] + "…"
        lines += [
            f"> 🔧 `{r.call.name}({arguments})` — {r.kind}",
            ">",
            "> " + text.replace("\n", "\n> "),
            "",
        ]
    return lines


def steps_to_json(store: ConversationStore, message_ids: Sequence[int]) -> list[dict[str, Any]]:
    steps = ToolStepList(store).of_messages(message_ids)
    return [
        {
            "message_id": message_id,
            "name": r.call.name,
            "arguments": dict(r.call.arguments),
            "call_id": r.call.call_id,
            "kind": r.kind,
            "result": r.text,
            "truncated": r.truncated,
            "elapsed_s": r.elapsed_s,
        }
        for message_id, results in steps.items()
        for r in results
    ]


def check_steps(data: Mapping[str, Any], ids: set[Any], name: str) -> list[dict[str, Any]]:
    """The export's tool steps (none in an older one); malformed ones refuse the import."""
    steps = data.get("tool_steps") or []
    kinds = set(get_args(OutcomeKind))
    if not isinstance(steps, list) or not all(
        isinstance(s, dict)
        and s.get("message_id") in ids
        and isinstance(s.get("name"), str)
        and isinstance(s.get("arguments"), dict)
        and s.get("kind") in kinds
        and isinstance(s.get("result"), str)
        for s in steps
    ):
        raise StoreError(f"{name} has malformed tool steps.")
    return steps


def import_steps(
    store: ConversationStore, steps: list[dict[str, Any]], ids: dict[Any, int]
) -> None:
    """Each imported step under its message's new id."""
    by_message: dict[int, list[ToolResult]] = {}
    for s in steps:
        call = ToolCall(s["name"], s["arguments"], str(s.get("call_id", "")))
        result = ToolResult(
            call,
            cast(OutcomeKind, s["kind"]),
            s["result"],
            bool(s.get("truncated")),
            float(s.get("elapsed_s") or 0.0),
        )
        by_message.setdefault(ids[s["message_id"]], []).append(result)
    for message_id, results in by_message.items():
        ToolStepList(store).record(message_id, results)


def prompts_to_json(store: ConversationStore, message_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The replies' tool steps as the model was given them (``tool_prompts``)."""
    found = ToolPromptList(store).of_messages(message_ids)
    return [
        {"message_id": message_id, "steps": [s.to_json() for s in steps]}
        for message_id, steps in found.items()
    ]


def check_prompts(
    data: Mapping[str, Any], ids: set[Any], name: str
) -> list[tuple[Any, list[StepPrompt]]]:
    """The export's ``tool_prompts`` and ``tool_pick`` (none in an older one); malformed
    ones refuse the import."""
    prompts = data.get("tool_prompts") or []
    pick = data.get("tool_pick")
    if pick is not None and (
        not isinstance(pick, list) or not all(isinstance(n, str) for n in pick)
    ):
        raise StoreError(f"{name} has a malformed tool pick.")
    if not isinstance(prompts, list) or not all(
        isinstance(p, dict) and p.get("message_id") in ids and isinstance(p.get("steps"), list)
        for p in prompts
    ):
        raise StoreError(f"{name} has malformed tool prompts.")
    try:
        return [(p["message_id"], [StepPrompt.from_json(s) for s in p["steps"]]) for p in prompts]
    except StoreError as exc:
        raise StoreError(f"{name}: {exc}") from exc


def import_prompts(
    store: ConversationStore,
    conversation_id: int,
    prompts: list[tuple[Any, list[StepPrompt]]],
    ids: dict[Any, int],
    pick: Any,
) -> None:
    """Each reply's prompted steps under its new id, and the conversation's tool pick."""
    for old_id, steps in prompts:
        ToolPromptList(store).record(ids[old_id], steps)
    if isinstance(pick, list):
        ToolPickStore(store).set(conversation_id, pick, last=False)
