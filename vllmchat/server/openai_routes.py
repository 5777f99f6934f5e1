"""OpenAI's endpoints: models, chat completions (streamed or not), completions,
embeddings and health."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vllmchat.core.app.serving.api_turn import ApiChat, ApiDone, ApiEvent, ApiFailed, ApiText, Usage
from vllmchat.core.app.serving.service import ApiService
from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import EngineError
from vllmchat.server.chat_input import (
    clean_text,
    read_chat,
    read_sampling,
    read_stop,
    require_object,
)
from vllmchat.server.errors import ApiError, bad_request, of_kind
from vllmchat.server.requests_in import (
    chosen_model,
    end_stream,
    first_event,
    json_body,
    log_request,
    new_id,
    now,
)
from vllmchat.server.turn_stream import TurnStream

VERSION = "vllmchat-1"


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
    }


class OpenAiRoutes:
    """The handlers, on one service."""

    def __init__(self, service: ApiService) -> None:
        self.service = service

    async def health(self, request: Request) -> Response:
        info = self.service.app.engine.info
        return JSONResponse(
            {"status": "ok", "model": self.service.loaded_model() if info else None}
        )

    async def models(self, request: Request) -> Response:
        models = await anyio.to_thread.run_sync(self.service.models)
        loaded = self.service.loaded_model()
        data = [
            {
                "id": m.id,
                "object": "model",
                "created": m.created,
                "owned_by": "vllmchat",
                "context_length": m.context_length,
                "loaded": m.id == loaded,
                "vision": m.vision,
            }
            for m in models
        ]
        return JSONResponse({"object": "list", "data": data})

    # -- chat ----------------------------------------------------------------------------
    async def chat_completions(self, request: Request) -> Response:
        started = time.monotonic()
        body = require_object(await json_body(request))
        model = chosen_model(self.service, body.get("model"))
        facts = self.service.facts(model)
        chat = read_chat(
            body,
            request.headers,
            base=self.service.app.settings.sampler,
            n_ctx=facts.n_ctx,
            tool_format=facts.tool_format,
            label="chat",
        )
        stream_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        name = model.id if model is not None else facts.id
        turn = TurnStream(self.service, chat, model)
        first = await first_event(turn, request)
        if body.get("stream"):
            chunks = self._chunks(turn, first, name, stream_usage, chat, request, started)
            return EventSourceResponse(chunks, ping=15, sep="\n")
        done = await _collect(turn, first)
        log_request(self.service, request, 200, started, chat, done)
        message: dict[str, Any] = {"role": "assistant", "content": done.text or None}
        if done.tool_calls:
            message["tool_calls"] = list(done.tool_calls)
        elif not done.text:
            message["content"] = ""
        return JSONResponse(
            {
                "id": new_id("chatcmpl"),
                "object": "chat.completion",
                "created": now(),
                "model": name,
                "system_fingerprint": VERSION,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": done.finish_reason,
                    }
                ],
                "usage": usage_json(done.usage),
            }
        )

    async def _chunks(
        self,
        turn: TurnStream,
        first: ApiEvent,
        name: str,
        with_usage: bool,
        chat: ApiChat,
        request: Request,
        started: float,
    ) -> AsyncIterator[str]:
        ident, created = new_id("chatcmpl"), now()

        def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
            return json.dumps(
                {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": name,
                    "system_fingerprint": VERSION,
                    "choices": [
                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                    ],
                    **more,
                },
                ensure_ascii=False,
            )

        sent = ""
        try:
            yield chunk({"role": "assistant", "content": ""})
            event: ApiEvent | ApiError = first
            async for event in _chain(first, turn):
                if isinstance(event, ApiText):
                    sent += event.text
                    yield chunk({"content": event.text})
                elif isinstance(event, ApiDone):
                    rest = event.text[len(sent) :] if event.text.startswith(sent) else ""
                    if rest:
                        yield chunk({"content": rest})
                    if event.tool_calls:
                        calls = [{"index": i, **c} for i, c in enumerate(event.tool_calls)]
                        yield chunk({"tool_calls": calls})
                    yield chunk({}, event.finish_reason)
                    if with_usage:
                        usage = usage_json(event.usage)
                        yield json.dumps(
                            {
                                "id": ident,
                                "object": "chat.completion.chunk",
                                "created": created,
                                "model": name,
                                "choices": [],
                                "usage": usage,
                            }
                        )
                    log_request(self.service, request, 200, started, chat, event)
                elif isinstance(event, ApiFailed | ApiError):
                    error = (
                        event if isinstance(event, ApiError) else of_kind(event.kind, event.message)
                    )
                    yield json.dumps(error.body())
                    log_request(
                        self.service, request, error.status, started, chat, note=error.message
                    )
            yield "[DONE]"
        finally:
            end_stream(turn, request)  # the client left (or the stream ended): the engine stops

    # -- completions ---------------------------------------------------------------------
    async def completions(self, request: Request) -> Response:
        started = time.monotonic()
        body = require_object(await json_body(request))
        model = chosen_model(self.service, body.get("model"))
        facts = self.service.facts(model)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise bad_request(
                "'prompt' must be a non-empty string (one prompt per request).", "prompt"
            )
        if body.get("n", 1) != 1:
            raise bad_request("'n' must be 1: send n requests.", "n")
        chat = ApiChat(
            ({"role": "user", "content": clean_text(prompt, "prompt")},),
            read_sampling(body, self.service.app.settings.sampler, facts.n_ctx),
            ChatOptions(raw=True),
            client=None,
            stop=read_stop(body),
            label="completion",
        )
        name = model.id if model is not None else facts.id
        turn = TurnStream(self.service, chat, model)
        first = await first_event(turn, request)
        ident, created = new_id("cmpl"), now()
        if body.get("stream"):

            async def pieces() -> AsyncIterator[str]:
                try:
                    async for event in _chain(first, turn):
                        if isinstance(event, ApiText):
                            yield json.dumps(_completion(ident, created, name, event.text, None))
                        elif isinstance(event, ApiDone):
                            yield json.dumps(
                                _completion(ident, created, name, "", event.finish_reason)
                            )
                        elif isinstance(event, ApiFailed | ApiError):
                            error = (
                                event
                                if isinstance(event, ApiError)
                                else of_kind(event.kind, event.message)
                            )
                            yield json.dumps(error.body())
                    yield "[DONE]"
                finally:
                    end_stream(turn, request)

            return EventSourceResponse(pieces(), ping=15, sep="\n")
        done = await _collect(turn, first)
        log_request(self.service, request, 200, started, chat, done)
        out = _completion(ident, created, name, done.text, done.finish_reason)
        out["usage"] = usage_json(done.usage)
        return JSONResponse(out)

    # -- embeddings ----------------------------------------------------------------------
    async def embeddings(self, request: Request) -> Response:
        body = require_object(await json_body(request))
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise bad_request("'input' must be a string or a non-empty list of strings.", "input")
        if len(texts) > 2048:
            raise bad_request("'input' holds more than 2048 texts.", "input")
        clean = [clean_text(t, "input") for t in texts]
        try:
            vectors = await anyio.to_thread.run_sync(self.service.embed, clean)
        except EngineError as exc:
            if "No embedding model" in exc.message:
                raise ApiError(400, exc.message, code="no_embedding_model", param="model") from exc
            raise of_kind(exc.kind, exc.message) from exc
        data = [
            {"object": "embedding", "index": i, "embedding": list(v)} for i, v in enumerate(vectors)
        ]
        name = self.service.app.settings.embedding_model
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": name,
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )


def _completion(
    ident: str, created: int, name: str, text: str, finish: str | None
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "text_completion",
        "created": created,
        "model": name,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
    }


async def _chain(first: ApiEvent, turn: TurnStream) -> AsyncIterator[ApiEvent | ApiError]:
    yield first
    if isinstance(first, ApiDone | ApiFailed):
        return
    async for event in turn:
        yield event


async def _collect(turn: TurnStream, first: ApiEvent) -> ApiDone:
    """The whole answer of a turn that is not streamed."""
    async for event in _chain(first, turn):
        if isinstance(event, ApiDone):
            return event
        if isinstance(event, ApiError):
            raise event
        if isinstance(event, ApiFailed):
            raise of_kind(event.kind, event.message)
    raise ApiError(500, "The turn ended without an answer.", type="server_error")
