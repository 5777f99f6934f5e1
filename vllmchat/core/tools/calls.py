"""Tool calls in a model's reply, in the formats llama.cpp's ``common/chat.cpp`` parses.

- Qwen / Hermes: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, and the
  Qwen3-Coder XML form ``<tool_call><function=NAME><parameter=K>V</parameter>...``;
- Llama 3.x: ``<|python_tag|>{"name": ..., "parameters": {...}}``, or a reply that is
  only that JSON object; Llama 3.1's ``<function=NAME>{...}</function>``;
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]``, and the newer
  ``[TOOL_CALLS]NAME[ARGS]{...}``;
- gpt-oss (harmony): ``to=functions.NAME ... <|message|>{...}<|call|>``;
- the grammar-constrained call of a template without a tool format: the reply is
  ``{"name": ..., "arguments": {...}}``.

A marker whose JSON does not parse is reported as malformed, never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vllmchat.core.tools.events import ToolCall

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_XML_PARAM = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
_LLAMA31_FUNCTION = re.compile(r"<function=([^>\s]+)>\s*(\{.*?\})\s*</function>", re.DOTALL)
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_ARGS = re.compile(r"([A-Za-z0-9_.-]+)(?:\[CALL_ID\][A-Za-z0-9]+)?\[ARGS\]")
_HARMONY = re.compile(
    r"to=functions\.([A-Za-z0-9_.-]+)[^<]*?(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>(.*?)"
    r"(?:<\|call\|>|<\|end\|>|$)",
    re.DOTALL,
)
_HARMONY_HEAD = re.compile(r"(?:<\|start\|>assistant)?<\|channel\|>commentary\s*$")


@dataclass(frozen=True)
class ParsedReply:
    """A reply split into its text and its calls; calls that could not be read, and why."""

    content: str
    calls: tuple[ToolCall, ...] = ()
    malformed: tuple[str, ...] = ()
    format: str = ""

    @property
    def has_calls(self) -> bool:
        return bool(self.calls or self.malformed)


class _Malformed(ValueError):
    pass


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"the call is not valid JSON ({exc.msg} at column {exc.colno})") from exc


def _arguments(raw: Any) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):  # some models send the arguments as a JSON string
        raw = _loads(raw) if raw.strip() else {}
    if not isinstance(raw, dict):
        raise _Malformed("the call's arguments are not a JSON object")
    return raw


def _call_from(obj: Any, n: int) -> ToolCall:
    if not isinstance(obj, dict):
        raise _Malformed("the call is not a JSON object")
    if isinstance(obj.get("function"), dict):  # {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Malformed("the call has no tool name")
    args = obj.get("arguments", obj.get("parameters"))
    call_id = obj.get("id")
    return ToolCall(name.strip(), _arguments(args), str(call_id) if call_id else f"call_{n}")


class _Collector:
    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.malformed: list[str] = []

    def add(self, make: Any) -> None:
        try:
            self.calls.append(make(len(self.calls) + len(self.malformed)))
        except _Malformed as exc:
            self.malformed.append(str(exc))


def _xml_call(name: str, body: str, n: int) -> ToolCall:
    args: dict[str, Any] = {}
    for key, value in _XML_PARAM.findall(body):
        try:
            args[key] = json.loads(value)
        except json.JSONDecodeError:
            args[key] = value
    return ToolCall(name, args, f"call_{n}")


def _hermes(text: str, out: _Collector) -> str:
    for body in _HERMES.findall(text):
        xml = _XML_FUNCTION.match(body)
        if xml:
            out.add(lambda n, xml=xml: _xml_call(xml.group(1), xml.group(2), n))
        else:
            out.add(lambda n, body=body: _call_from(_loads(body), n))
    return _HERMES.sub("", text)


def _json_values(text: str) -> list[Any]:
    """The JSON values one after another in ``text`` (separated by space, ``;`` or ``,``)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n;,":
            pos += 1
        if pos >= len(text):
            return values
        value, pos = decoder.raw_decode(text, pos)
        values.append(value)


def _mistral(text: str, out: _Collector) -> str:
    head, _, rest = text.partition(_MISTRAL)
    for chunk in rest.split(_MISTRAL):
        chunk = chunk.strip()
        if chunk.startswith("["):
            try:
                items = _json_values(chunk)
            except json.JSONDecodeError as exc:
                out.malformed.append(
                    f"the call is not valid JSON ({exc.msg} at column {exc.colno})"
                )
                continue
            for item in items:
                for obj in item if isinstance(item, list) else [item]:
                    out.add(lambda n, obj=obj: _call_from(obj, n))
            continue
        parts = _MISTRAL_ARGS.split(chunk)  # ["", name, args, name, args, ...]
        if len(parts) < 3:
            out.malformed.append("the call after [TOOL_CALLS] names no tool")
            continue
        for name, args in zip(parts[1::2], parts[2::2], strict=False):
            out.add(
                lambda n, name=name, args=args: ToolCall(
                    name, _arguments(args.strip()), f"call_{n}"
                )
            )
    return head


def _python_tag(text: str, out: _Collector) -> str:
    head, _, rest = text.partition(_PYTHON_TAG)
    try:
        values = _json_values(rest.strip())
    except json.JSONDecodeError as exc:
        out.malformed.append(f"the call is not valid JSON ({exc.msg} at column {exc.colno})")
        return head
    for value in values:
        out.add(lambda n, value=value: _call_from(value, n))
    return head


def _harmony(text: str, out: _Collector) -> str:
    for name, body in _HARMONY.findall(text):
        out.add(
            lambda n, name=name, body=body: ToolCall(name, _arguments(body.strip()), f"call_{n}")
        )
    kept = _HARMONY.sub("", text)
    return _HARMONY_HEAD.sub("", kept)


def _whole_json(text: str, out: _Collector) -> bool:
    """A reply that is only a call object (Llama 3 JSON, or a constrained call)."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    if not stripped.startswith("{") or '"name"' not in stripped:
        return False
    try:
        obj = json.loads(stripped)
    except json.JSONDecodeError as exc:
        if stripped.endswith("}"):
            out.malformed.append(f"the call is not valid JSON ({exc.msg} at column {exc.colno})")
            return True
        return False
    if not isinstance(obj, dict) or not ({"arguments", "parameters"} & obj.keys()):
        return False
    out.add(lambda n: _call_from(obj, n))
    return True


def parse_reply(text: str) -> ParsedReply:
    """The calls in a model's reply, whichever of the common formats it used."""
    out = _Collector()
    if "<tool_call>" in text:
        content, fmt = _hermes(text, out), "hermes"
    elif _MISTRAL in text:
        content, fmt = _mistral(text, out), "mistral"
    elif _PYTHON_TAG in text:
        content, fmt = _python_tag(text, out), "llama3"
    elif "to=functions." in text:
        content, fmt = _harmony(text, out), "gpt-oss"
    elif _LLAMA31_FUNCTION.search(text):
        for name, body in _LLAMA31_FUNCTION.findall(text):
            out.add(
                lambda n, name=name, body=body: ToolCall(
                    name, _arguments(_loads(body)), f"call_{n}"
                )
            )
        content, fmt = _LLAMA31_FUNCTION.sub("", text), "llama3.1"
    elif _whole_json(text, out):
        content, fmt = "", "json"
    else:
        return ParsedReply(text)
    return ParsedReply(content.strip(), tuple(out.calls), tuple(out.malformed), fmt)
