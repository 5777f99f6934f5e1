"""Anthropic's Messages API (``POST /v1/messages``), as its SDK and clients send it."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vllmchat.core.app.serving.api_turn import ApiDone, ApiFailed, ApiText
from vllmchat.core.app.serving.service import ApiService
from vllmchat.server.chat_input import require_object
from vllmchat.server.errors import ApiError, bad_request, of_kind
from vllmchat.server.requests_in import in_queue, json_body, log_request, new_id
from vllmchat.server.shapes import as_functions, read_request, start_turn

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise bad_request(f"{where} must be a string or a list of content blocks.", where)
    return content


def to_openai(body: dict[str, Any], *, reply: bool = True) -> dict[str, Any]:
    """An Anthropic request in OpenAI's shape (``reply``: it asks for an answer, so it
    must say how long one may be; a count of its tokens need not)."""
    if reply and not isinstance(body.get("max_tokens"), int):
        raise bad_request("'max_tokens' is required (a positive integer).", "max_tokens")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = (
            system
            if isinstance(system, str)
            else "\n".join(
                b.get("text", "") for b in _blocks(system, "system") if isinstance(b, dict)
            )
        )
        messages.append({"role": "system", "content": text})
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list.", "messages")
    for n, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise bad_request(f"messages[{n}].role must be user or assistant.", f"messages[{n}]")
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for b in _blocks(m.get("content"), f"messages[{n}].content"):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "text":
                parts.append({"type": "text", "text": b.get("text")})
            elif kind == "image":
                src = b.get("source") or {}
                url = f"data:{src.get('media_type', '')};base64,{src.get('data', '')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif kind == "tool_use":
                args = json.dumps(b.get("input") or {})
                calls.append(
                    {
                        "id": b.get("id"),
                        "type": "function",
                        "function": {"name": b.get("name"), "arguments": args},
                    }
                )
            elif kind == "tool_result":
                result = b.get("content")
                if isinstance(result, list):
                    result = "\n".join(x.get("text", "") for x in result if isinstance(x, dict))
                messages.append(
                    {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": result or ""}
                )
            else:
                raise bad_request(
                    f"messages[{n}] has a {kind!r} block; text, image, tool_use and "
                    "tool_result are supported."
                )
        if parts or calls:
            entry: dict[str, Any] = {"role": m["role"], "content": parts}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
    out: dict[str, Any] = {"messages": messages}
    if "max_tokens" in body:
        out["max_tokens"] = body["max_tokens"]
    for name in ("temperature", "top_p", "top_k"):
        if name in body:
            out[name] = body[name]
    if body.get("stop_sequences"):
        out["stop"] = body["stop_sequences"]
    if body.get("tools"):
        out["tools"] = as_functions(body["tools"], "input_schema")
        choice = body.get("tool_choice") or {}
        kind = choice.get("type") if isinstance(choice, dict) else None
        out["tool_choice"] = {
            "any": "required",
            "none": "none",
            "tool": {"type": "function", "function": {"name": choice.get("name")}}
            if isinstance(choice, dict)
            else None,
        }.get(kind or "", "auto")
    user = (
        (body.get("metadata") or {}).get("user_id")
        if isinstance(body.get("metadata"), dict)
        else None
    )
    if user:
        out["user"] = user
    return out


def _content(done: ApiDone) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": done.text}] if done.text else []
    for call in done.tool_calls:
        fn = call["function"]
        blocks.append(
            {
                "type": "tool_use",
                "id": "toolu_" + call["id"][5:],
                "name": fn["name"],
                "input": json.loads(fn["arguments"] or "{}"),
            }
        )
    return blocks


def _usage(done: ApiDone) -> dict[str, int]:
    return {
        "input_tokens": done.usage.prompt - done.usage.cached,
        "output_tokens": done.usage.completion,
        "cache_read_input_tokens": done.usage.cached,
        "cache_creation_input_tokens": 0,
    }


def _error(error: ApiError) -> JSONResponse:
    return JSONResponse(
        {"type": "error", **error.body()}, status_code=error.status, headers=error.headers
    )


class AnthropicRoutes:
    def __init__(self, service: ApiService) -> None:
        self.service = service

    async def messages(self, request: Request) -> Response:
        try:
            body = require_object(await json_body(request))
            started = await start_turn(
                self.service, request, to_openai(body), body.get("model"), "messages"
            )
        except ApiError as exc:
            return _error(exc)
        ident = new_id("msg")
        if not body.get("stream"):
            try:
                done = await started.whole()
            except ApiError as exc:
                return _error(exc)
            return JSONResponse(
                {
                    "id": ident,
                    "type": "message",
                    "role": "assistant",
                    "model": started.name,
                    "content": _content(done),
                    "stop_reason": STOP_REASONS.get(done.finish_reason, "end_turn"),
                    "stop_sequence": None,
                    "usage": _usage(done),
                }
            )

        async def events() -> AsyncIterator[ServerSentEvent]:
            def event(name: str, data: dict[str, Any]) -> ServerSentEvent:
                return ServerSentEvent(
                    data=json.dumps({"type": name, **data}, ensure_ascii=False), event=name
                )

            yield event(
                "message_start",
                {
                    "message": {
                        "id": ident,
                        "type": "message",
                        "role": "assistant",
                        "model": started.name,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                    }
                },
            )
            yield event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            )
            sent = ""
            async for item in started.events():
                if isinstance(item, ApiText):
                    sent += item.text
                    yield event(
                        "content_block_delta",
                        {"index": 0, "delta": {"type": "text_delta", "text": item.text}},
                    )
                elif isinstance(item, ApiDone):
                    rest = item.text[len(sent) :] if item.text.startswith(sent) else ""
                    if rest:
                        yield event(
                            "content_block_delta",
                            {"index": 0, "delta": {"type": "text_delta", "text": rest}},
                        )
                    yield event("content_block_stop", {"index": 0})
                    for n, block in enumerate(b for b in _content(item) if b["type"] == "tool_use"):
                        yield event(
                            "content_block_start",
                            {"index": n + 1, "content_block": {**block, "input": {}}},
                        )
                        yield event(
                            "content_block_delta",
                            {
                                "index": n + 1,
                                "delta": {
                                    "type": "input_json_delta",
                                    "partial_json": json.dumps(block["input"]),
                                },
                            },
                        )
                        yield event("content_block_stop", {"index": n + 1})
                    yield event(
                        "message_delta",
                        {
                            "delta": {
                                "stop_reason": STOP_REASONS.get(item.finish_reason, "end_turn"),
                                "stop_sequence": None,
                            },
                            "usage": _usage(item),
                        },
                    )
                    yield event("message_stop", {})
                    started.logged(200, item)
                elif isinstance(item, ApiFailed | ApiError):
                    error = item if isinstance(item, ApiError) else of_kind(item.kind, item.message)
                    yield event("error", {"error": error.body()["error"]})

        return EventSourceResponse(events(), ping=15, sep="\n")

    async def count_tokens(self, request: Request) -> Response:
        """``{"input_tokens": N}``: the tokens of a Messages request's system, messages
        and tools, counted by the model's tokenizer on the prompt its turn would read."""
        started = time.monotonic()
        try:
            body = require_object(await json_body(request))
            model, _, chat = read_request(
                self.service, request, to_openai(body, reply=False), body.get("model"), "count"
            )
            count = await in_queue(self.service.count_tokens, chat, model)
        except ApiError as exc:
            return _error(exc)
        log_request(self.service, request, 200, started, chat, note=f"{count} tokens")
        return JSONResponse({"input_tokens": count})
