"""Tools through an OpenAI-compatible server: ``tools`` in the request, calls in the stream.

The rest of the app keeps a call as the text a model writes (``<tool_call>{...}</tool_call>``,
what ``tools.calls`` parses), so a server's streamed ``tool_calls`` are joined into that
text, and on the way back an assistant message holding calls gets its ``tool_calls``
field and a tool result its ``tool_call_id``, as the API expects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vllmchat.core.tools.calls import parse_reply


def openai_messages(messages: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The messages as the chat completions API takes them, calls and results included."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "assistant" and "<tool_call>" in content:
            parsed = parse_reply(content)
            if parsed.calls:
                calls = [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                    }
                    for c in parsed.calls
                ]
                out.append(
                    {"role": "assistant", "content": parsed.content or None, "tool_calls": calls}
                )
                continue
        if role == "tool":
            out.append(
                {"role": "tool", "content": content, "tool_call_id": m.get("tool_call_id", "")}
            )
            continue
        out.append({"role": role, "content": content})
    return out


class StreamedCalls:
    """A stream's ``tool_calls`` pieces, joined by index into the calls' text."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, str]] = {}

    def add(self, pieces: Iterable[Any] | None) -> None:
        for piece in pieces or ():
            call = self._calls.setdefault(int(getattr(piece, "index", 0) or 0), {})
            if getattr(piece, "id", None):
                call["id"] = str(piece.id)
            function = getattr(piece, "function", None)
            if function is not None:
                if getattr(function, "name", None):
                    call["name"] = call.get("name", "") + str(function.name)
                if getattr(function, "arguments", None):
                    call["arguments"] = call.get("arguments", "") + str(function.arguments)

    def text(self) -> str:
        """``<tool_call>`` blocks; arguments that are not JSON are kept as written (malformed)."""
        blocks = []
        for _, call in sorted(self._calls.items()):
            raw = call.get("arguments", "").strip() or "{}"
            head = json.dumps({"name": call.get("name", ""), "id": call.get("id", "")})
            blocks.append(f'<tool_call>{head[:-1]}, "arguments": {raw}}}</tool_call>')
        return "\n".join(blocks)
