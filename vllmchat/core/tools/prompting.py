"""Tools in the prompt: through the model's own chat template where it has a tool format
(as llama.cpp's ``--jinja`` does), else a system message and a grammar-constrained call.

A template has a tool format when rendering it with a probe tool shows the tool's
name (llama.cpp's own capability test). For one without, the tools are described in
the system message and the reply is constrained by ``call_schema``: a JSON object
``{"name": ..., "arguments": {...}}`` for one of the offered tools, or plain text.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from vllmchat.core.tools.events import ToolInfo

_PROBE = "vllmchat_probe_tool"
_ENV = ImmutableSandboxedEnvironment(
    loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True
)


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


_ENV.globals["raise_exception"] = _raise


@functools.lru_cache(maxsize=16)
def template_supports_tools(template: str) -> bool:
    """Whether the chat template renders a ``tools`` list (it has a tool format)."""
    if "tools" not in template:
        return False
    probe = {
        "type": "function",
        "function": {"name": _PROBE, "description": "probe", "parameters": {"type": "object"}},
    }
    try:
        text = _ENV.from_string(template).render(
            messages=[{"role": "user", "content": "hi"}],
            tools=[probe],
            bos_token="",
            eos_token="",
            add_generation_prompt=True,
        )
    except (jinja2.TemplateError, TypeError, ValueError):
        return False
    return _PROBE in text


def call_format(template: str) -> str:
    """The call format a template's model writes, as ``calls.parse_reply`` names it."""
    if "<|channel|>" in template:
        return "gpt-oss"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<tool_call>" in template:
        return "hermes"
    if "<|python_tag|>" in template or "<|start_header_id|>" in template:
        return "llama3"
    return "json" if not template_supports_tools(template) else "hermes"


# A reply in plain text, not a call: it starts with neither ``{``, ``[`` nor ``<`` (GBNF).
TEXT_GRAMMAR = "root ::= [^{\\[<\\n ] [^\\x00]*\n"


def tool_format(template: str) -> str:
    """The template's tool format (``call_format``), or "" when it has none."""
    return call_format(template) if template_supports_tools(template) else ""


def openai_tools(tools: Sequence[ToolInfo]) -> list[dict[str, Any]]:
    """The ``tools`` list a template (or an OpenAI-compatible server) takes."""
    return [t.openai_schema() for t in tools]


def fallback_system_prompt(tools: Sequence[ToolInfo]) -> str:
    """Tools described for a template without a tool format (stable: a cacheable prefix)."""
    lines = [
        "You can call tools. To call one, reply with only a JSON object: "
        '{"name": "<tool name>", "arguments": {<arguments>}}. '
        "A tool's result comes back in the next message. Otherwise reply in plain text.",
        "Tools:",
    ]
    for tool in tools:
        schema = json.dumps(dict(tool.input_schema), sort_keys=True, ensure_ascii=False)
        lines.append(f"- {tool.model_name}: {tool.description.strip()} Arguments: {schema}")
    return "\n".join(lines)


def call_schema(tools: Sequence[ToolInfo]) -> dict[str, Any]:
    """A JSON Schema for one call of one of ``tools`` (llama.cpp turns it into GBNF)."""
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool.model_name},
                "arguments": dict(tool.input_schema) or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        for tool in tools
    ]
    return options[0] if len(options) == 1 else {"oneOf": options}


def result_message(
    result_text: str, *, call_id: str, name: str, has_format: bool
) -> dict[str, str]:
    """The message that carries a result back: the template's ``tool`` role, or a user
    message saying it is a tool result where the template has no tool format."""
    if has_format:
        return {"role": "tool", "content": result_text, "tool_call_id": call_id, "name": name}
    return {
        "role": "user",
        "content": f"Result of {name}:\n{result_text}\n\nAnswer in plain text with this result.",
    }
