"""Tools an API client offers: how the model is told, how its calls come back.

The client's tools (OpenAI's list) go to the model's chat template where it has a
tool format; for a template without one, they are described in a system message.
``tool_choice`` "required" (or a named function) holds the reply to one call by a
JSON Schema (llama.cpp's grammar). The calls the reply holds go back to the client
as ``tool_calls``: nothing runs here (MCP tools never run for an API client).
A call the client sends back in its history is written as the model writes calls.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllmchat.core.tools.calls import ParsedReply, parse_reply


class ToolsRefused(ValueError):
    """The tools or tool choice a client sent cannot be used (said to it as a 400)."""


@dataclass(frozen=True)
class OfferedTools:
    """The tools of one request, checked."""

    tools: tuple[dict[str, Any], ...]
    choice: str  # "auto", "none", "required" or a function's name

    @property
    def active(self) -> bool:
        return bool(self.tools) and self.choice != "none"

    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def call_schema(self) -> dict[str, Any] | None:
        """The JSON Schema a required call must fit (None: the reply is free)."""
        if not self.active or self.choice == "auto":
            return None
        chosen = [t for t in self.tools if self.choice in ("required", t["function"]["name"])]
        options = [
            {
                "type": "object",
                "properties": {
                    "name": {"const": t["function"]["name"]},
                    "arguments": t["function"].get("parameters") or {"type": "object"},
                },
                "required": ["name", "arguments"],
            }
            for t in chosen
        ]
        return options[0] if len(options) == 1 else {"oneOf": options}

    def system_text(self) -> str:
        """The tools described for a template without a tool format."""
        lines = [
            "You can call tools. To call one, reply with only a JSON object: "
            '{"name": "<tool name>", "arguments": {<arguments>}}. '
            "A tool's result comes back in the next message. Otherwise reply in plain text.",
            "Tools:",
        ]
        for t in self.tools:
            f = t["function"]
            schema = json.dumps(f.get("parameters") or {}, sort_keys=True, ensure_ascii=False)
            lines.append(
                f"- {f['name']}: {str(f.get('description', '')).strip()} Arguments: {schema}"
            )
        return "\n".join(lines)


NO_TOOLS = OfferedTools((), "none")


def offered_tools(tools: Any, choice: Any) -> OfferedTools:
    """Check a request's ``tools`` and ``tool_choice``; ``ToolsRefused`` says what is wrong."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise ToolsRefused("'tools' must be a list of functions.")
    checked: list[dict[str, Any]] = []
    for n, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(fn, dict)
        ):
            raise ToolsRefused(f"tools[{n}] must be {{'type': 'function', 'function': {{...}}}}.")
        name = fn.get("name")
        if not isinstance(name, str) or not name.replace("_", "a").replace("-", "a").isalnum():
            raise ToolsRefused(f"tools[{n}].function.name must be letters, digits, _ or -.")
        params = fn.get("parameters", {"type": "object"})
        try:
            Draft202012Validator.check_schema(params)
        except SchemaError as exc:
            raise ToolsRefused(
                f"tools[{n}].function.parameters is not a valid JSON Schema: {exc.message}"
            ) from exc
        checked.append({"type": "function", "function": {**fn, "parameters": params}})
    return OfferedTools(tuple(checked), _choice(choice, [t["function"]["name"] for t in checked]))


def _choice(choice: Any, names: Sequence[str]) -> str:
    if choice is None:
        return "auto" if names else "none"
    if choice in ("auto", "none", "required"):
        if choice == "required" and not names:
            raise ToolsRefused("tool_choice 'required' needs at least one tool.")
        return str(choice)
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if name in names:
            return str(name)
        raise ToolsRefused(f"tool_choice names {name!r}, which is not among the tools.")
    raise ToolsRefused("tool_choice must be 'auto', 'none', 'required' or a function.")


def call_text(calls: Sequence[Mapping[str, Any]], tool_format: str) -> str:
    """Calls from a client's history, written as the model writes them."""
    written = []
    for call in calls:
        fn = call.get("function") or {}
        raw = fn.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            arguments = raw
        body = {"name": fn.get("name", ""), "arguments": arguments}
        if tool_format == "llama3":
            written.append(
                "<|python_tag|>" + json.dumps({"name": body["name"], "parameters": arguments})
            )
        elif tool_format == "mistral":
            written.append("[TOOL_CALLS]" + json.dumps([body]))
        elif tool_format:
            written.append(
                "<tool_call>\n" + json.dumps(body, ensure_ascii=False) + "\n</tool_call>"
            )
        else:
            written.append(json.dumps(body, ensure_ascii=False))
    return "\n".join(written)


def reply_calls(text: str, offered: OfferedTools) -> ParsedReply | None:
    """The calls in a reply to a request that offered tools (None: it holds none)."""
    if not offered.active:
        return None
    parsed = parse_reply(text)
    return parsed if parsed.calls else None


def openai_calls(parsed: ParsedReply) -> list[dict[str, Any]]:
    """The calls as OpenAI's ``tool_calls``."""
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
            },
        }
        for call in parsed.calls
    ]
