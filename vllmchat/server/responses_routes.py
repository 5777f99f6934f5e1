"""OpenAI's Responses API (``POST /v1/responses``), stateless: every request carries
its whole input; ``previous_response_id`` is refused (nothing is stored here)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vllmchat.core.app.serving.api_turn import ApiDone, ApiFailed, ApiText
from vllmchat.core.app.serving.service import ApiService
from vllmchat.server.chat_input import require_object
from vllmchat.server.errors import ApiError, bad_request, of_kind
from vllmchat.server.requests_in import json_body, new_id, now
from vllmchat.server.shapes import as_functions, start_turn


def _part(p: Any) -> dict[str, Any]:
    kind = p.get("type") if isinstance(p, dict) else None
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": p.get("text")}
    if kind == "input_image":
        return {"type": "image_url", "image_url": {"url": p.get("image_url")}}
    raise bad_request(
        f"An input part has the type {kind!r}; input_text and input_image are supported."
    )


def to_openai(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("previous_response_id"):
        raise bad_request(
            "This server keeps no responses: send the whole conversation as 'input'.",
            "previous_response_id",
        )
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    raw = body.get("input")
    if isinstance(raw, str):
        messages.append({"role": "user", "content": raw})
    elif isinstance(raw, list) and raw:
        for item in raw:
            if not isinstance(item, dict):
                raise bad_request("Each input item must be an object.", "input")
            kind = item.get("type", "message")
            if kind == "message":
                content = item.get("content")
                parts = content if isinstance(content, str) else [_part(p) for p in content or []]
                messages.append({"role": item.get("role"), "content": parts})
            elif kind == "function_call":
                call = {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {
                        "name": item.get("name"),
                        "arguments": item.get("arguments", "{}"),
                    },
                }
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            elif kind == "function_call_output":
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": item.get("call_id"),
                        "content": item.get("output", ""),
                    }
                )
            else:
                raise bad_request(f"Input items of type {kind!r} are not supported.", "input")
    else:
        raise bad_request("'input' must be a string or a non-empty list of items.", "input")
    out: dict[str, Any] = {"messages": messages}
    for name in ("temperature", "top_p", "user", "prompt_cache_key"):
        if name in body:
            out[name] = body[name]
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.get("name", "answer"), "schema": fmt.get("schema")},
        }
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    if body.get("tools"):
        out["tools"] = as_functions(body["tools"], "parameters", "function")
        out["tool_choice"] = (
            body.get("tool_choice", "auto") if isinstance(body.get("tool_choice"), str) else "auto"
        )
    return out


def _response(ident: str, name: str, done: ApiDone | None, status: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if done is not None and done.text:
        output.append(
            {
                "type": "message",
                "id": ident.replace("resp", "msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": done.text, "annotations": []}],
            }
        )
    for call in done.tool_calls if done is not None else ():
        output.append(
            {
                "type": "function_call",
                "id": "fc_" + call["id"][5:],
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    usage = None
    if done is not None:
        u = done.usage
        usage = {
            "input_tokens": u.prompt,
            "output_tokens": u.completion,
            "total_tokens": u.prompt + u.completion,
            "input_tokens_details": {"cached_tokens": u.cached},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
    return {
        "id": ident,
        "object": "response",
        "created_at": now(),
        "status": status,
        "model": name,
        "output": output,
        "usage": usage,
        "store": False,
        "incomplete_details": {"reason": "max_output_tokens"}
        if done is not None and done.finish_reason == "length"
        else None,
    }


class ResponsesRoutes:
    def __init__(self, service: ApiService) -> None:
        self.service = service

    async def create(self, request: Request) -> Response:
        body = require_object(await json_body(request))
        started = await start_turn(
            self.service, request, to_openai(body), body.get("model"), "responses"
        )
        ident = new_id("resp")
        if not body.get("stream"):
            done = await started.whole()
            status = "incomplete" if done.finish_reason == "length" else "completed"
            return JSONResponse(_response(ident, started.name, done, status))

        async def events() -> AsyncIterator[ServerSentEvent]:
            n = 0

            def event(name: str, data: dict[str, Any]) -> ServerSentEvent:
                nonlocal n
                n += 1
                return ServerSentEvent(
                    data=json.dumps(
                        {"type": name, "sequence_number": n, **data}, ensure_ascii=False
                    ),
                    event=name,
                )

            yield event(
                "response.created",
                {"response": _response(ident, started.name, None, "in_progress")},
            )
            item = ident.replace("resp", "msg")
            sent = ""
            async for got in started.events():
                if isinstance(got, ApiText):
                    sent += got.text
                    yield event(
                        "response.output_text.delta",
                        {"item_id": item, "output_index": 0, "content_index": 0, "delta": got.text},
                    )
                elif isinstance(got, ApiDone):
                    rest = got.text[len(sent) :] if got.text.startswith(sent) else ""
                    if rest:
                        yield event(
                            "response.output_text.delta",
                            {"item_id": item, "output_index": 0, "content_index": 0, "delta": rest},
                        )
                    yield event(
                        "response.output_text.done",
                        {"item_id": item, "output_index": 0, "content_index": 0, "text": got.text},
                    )
                    status = "incomplete" if got.finish_reason == "length" else "completed"
                    yield event(
                        "response.completed",
                        {"response": _response(ident, started.name, got, status)},
                    )
                    started.logged(200, got)
                elif isinstance(got, ApiFailed | ApiError):
                    error = got if isinstance(got, ApiError) else of_kind(got.kind, got.message)
                    yield event(
                        "error",
                        {"code": error.code, "message": error.message, "param": error.param},
                    )

        return EventSourceResponse(events(), ping=15, sep="\n")
