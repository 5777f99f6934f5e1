"""Ollama's API (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``,
``/api/ps``, ``/api/version``), streamed as newline-delimited JSON like Ollama, its
errors as ``{"error": "..."}``. Nothing here pulls, creates or deletes models: those
endpoints do not exist."""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from vllmchat import __version__
from vllmchat.core.app.serving.api_turn import ApiDone, ApiFailed, ApiText
from vllmchat.core.app.serving.service import ApiService
from vllmchat.server.chat_input import require_object
from vllmchat.server.errors import ApiError, bad_request, of_kind
from vllmchat.server.ollama_models import running, show
from vllmchat.server.requests_in import chosen_model, json_body
from vllmchat.server.shapes import StartedTurn, start_turn

OPTION_NAMES = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "num_predict": "max_tokens",
    "stop": "stop",
    "repeat_penalty": "repeat_penalty",
}


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _common(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise bad_request("'options' must be an object.", "options")
    for name, ours in OPTION_NAMES.items():
        if name in options:
            out[ours] = options[name]
    if out.get("max_tokens") is not None and out["max_tokens"] < 0:
        out.pop("max_tokens")  # Ollama's -1: as long as the context allows
    fmt = body.get("format")
    if fmt == "json":
        out["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "format", "schema": fmt},
        }
    think = body.get("think")
    if isinstance(think, bool):
        out["chat_template_kwargs"] = {"enable_thinking": think}
    return out


def _messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list.", "messages")
    out = []
    for n, m in enumerate(raw):
        if not isinstance(m, dict):
            raise bad_request(f"messages[{n}] must be an object.", f"messages[{n}]")
        content: Any = m.get("content", "")
        images = m.get("images") or []
        if images:
            if not isinstance(images, list):
                raise bad_request(f"messages[{n}].images must be a list of base64 images.")
            content = [{"type": "text", "text": content or ""}] + [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{i}"}}
                for i in images
            ]
        entry: dict[str, Any] = {"role": m.get("role"), "content": content}
        if m.get("tool_calls"):
            entry["tool_calls"] = [
                {
                    "id": f"call_{k}",
                    "type": "function",
                    "function": {
                        "name": c.get("function", {}).get("name"),
                        "arguments": json.dumps(c.get("function", {}).get("arguments") or {}),
                    },
                }
                for k, c in enumerate(m["tool_calls"])
                if isinstance(c, dict)
            ]
        out.append(entry)
    return out


def _final(started: StartedTurn, done: ApiDone) -> dict[str, Any]:
    return {
        "model": started.name,
        "created_at": _stamp(),
        "done": True,
        "done_reason": "length" if done.finish_reason == "length" else "stop",
        "prompt_eval_count": done.usage.prompt - done.usage.cached,
        "eval_count": done.usage.completion,
    }


Handler = Callable[["OllamaRoutes", Request], Awaitable[Response]]


def _ollama_errors(handler: Handler) -> Handler:
    """A refusal in Ollama's shape: ``{"error": "..."}`` with its status."""

    @functools.wraps(handler)
    async def answer(self: OllamaRoutes, request: Request) -> Response:
        try:
            return await handler(self, request)
        except ApiError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    return answer


class OllamaRoutes:
    def __init__(self, service: ApiService) -> None:
        self.service = service

    @_ollama_errors
    async def show(self, request: Request) -> Response:
        """A model's details, template, parameters, header values and capabilities."""
        body = require_object(await json_body(request))
        name = body.get("model", body.get("name"))
        model = chosen_model(self.service, name)
        card = await anyio.to_thread.run_sync(self.service.card, model)
        if card is None:
            raise ApiError(404, "No model is loaded and none is named.", code="model_not_found")
        n_ctx = self.service.facts(model).n_ctx
        return JSONResponse(show(card, self.service.app.settings.sampler, n_ctx))

    @_ollama_errors
    async def ps(self, request: Request) -> Response:
        """The model loaded: its memory, its context, when it is let go."""
        return JSONResponse(running(await anyio.to_thread.run_sync(self.service.running)))

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": __version__})

    async def tags(self, request: Request) -> Response:
        models = await anyio.to_thread.run_sync(self.service.models)
        return JSONResponse(
            {
                "models": [
                    {
                        "name": m.id,
                        "model": m.id,
                        "modified_at": datetime.datetime.fromtimestamp(
                            m.created, datetime.timezone.utc
                        ).isoformat(),
                        "size": m.size,
                        "digest": "",
                        "details": {"format": "gguf", "context_length": m.context_length},
                    }
                    for m in models
                ]
            }
        )

    @_ollama_errors
    async def chat(self, request: Request) -> Response:
        body = require_object(await json_body(request))
        openai = {"messages": _messages(body.get("messages")), **_common(body)}
        if body.get("tools"):
            openai["tools"] = body["tools"]
        started = await start_turn(self.service, request, openai, body.get("model"), "ollama chat")

        def line(text: str, done: ApiDone | None = None) -> str:
            if done is None:
                return (
                    json.dumps(
                        {
                            "model": started.name,
                            "created_at": _stamp(),
                            "message": {"role": "assistant", "content": text},
                            "done": False,
                        }
                    )
                    + "\n"
                )
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if done.tool_calls:
                message["tool_calls"] = [
                    {
                        "function": {
                            "name": c["function"]["name"],
                            "arguments": json.loads(c["function"]["arguments"] or "{}"),
                        }
                    }
                    for c in done.tool_calls
                ]
            return json.dumps({**_final(started, done), "message": message}) + "\n"

        return await self._answer(started, body, line)

    @_ollama_errors
    async def generate(self, request: Request) -> Response:
        body = require_object(await json_body(request))
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise bad_request("'prompt' must be a string.", "prompt")
        if not prompt:  # Ollama's way to load a model: answer at once, loaded
            return JSONResponse(
                {"model": body.get("model"), "created_at": _stamp(), "response": "", "done": True}
            )
        messages: list[dict[str, Any]] = []
        if isinstance(body.get("system"), str) and body["system"]:
            messages.append({"role": "system", "content": body["system"]})
        messages.append({"role": "user", "content": prompt})
        started = await start_turn(
            self.service,
            request,
            {"messages": messages, **_common(body)},
            body.get("model"),
            "ollama generate",
        )

        def line(text: str, done: ApiDone | None = None) -> str:
            if done is None:
                return (
                    json.dumps(
                        {
                            "model": started.name,
                            "created_at": _stamp(),
                            "response": text,
                            "done": False,
                        }
                    )
                    + "\n"
                )
            return json.dumps({**_final(started, done), "response": text}) + "\n"

        return await self._answer(started, body, line)

    async def _answer(self, started: StartedTurn, body: dict[str, Any], line: Any) -> Response:
        if body.get("stream", True) is False:
            done = await started.whole()
            return Response(line(done.text, done), media_type="application/json")

        async def lines() -> AsyncIterator[str]:
            sent = ""
            async for item in started.events():
                if isinstance(item, ApiText):
                    sent += item.text
                    yield line(item.text)
                elif isinstance(item, ApiDone):
                    rest = item.text[len(sent) :] if item.text.startswith(sent) else ""
                    started.logged(200, item)
                    yield line(rest, item)
                elif isinstance(item, ApiFailed | ApiError):
                    error = item if isinstance(item, ApiError) else of_kind(item.kind, item.message)
                    yield json.dumps({"error": error.message}) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")
