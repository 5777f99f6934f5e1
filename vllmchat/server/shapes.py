"""Shared steps of the other shapes' routes: run a turn read as an OpenAI request and
hand back its events, or its whole answer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from vllmchat.core.app.serving.api_turn import ApiChat, ApiDone, ApiEvent, ApiFailed
from vllmchat.core.app.serving.models_on_offer import OfferedModel
from vllmchat.core.app.serving.service import ApiService, ModelFacts
from vllmchat.server.chat_input import read_chat
from vllmchat.server.errors import ApiError, of_kind
from vllmchat.server.requests_in import chosen_model, end_stream, first_event, log_request
from vllmchat.server.turn_stream import TurnStream


def as_functions(tools: Any, schema_key: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Another shape's tool list as OpenAI's functions (``schema_key``: where each tool
    keeps its JSON Schema; ``kind``: the ``type`` a tool must have, if any)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get(schema_key) or {"type": "object"},
            },
        }
        for t in tools
        if isinstance(t, dict) and (kind is None or t.get("type") == kind)
    ]


@dataclass
class StartedTurn:
    """A turn under way: its first event read, the rest to come."""

    service: ApiService
    request: Request
    chat: ApiChat
    turn: TurnStream
    first: ApiEvent
    name: str
    started: float

    async def events(self) -> AsyncIterator[ApiEvent | ApiError]:
        """Every event, the first included; the turn stops if the reader leaves."""
        try:
            yield self.first
            if isinstance(self.first, ApiDone | ApiFailed):
                return
            async for event in self.turn:
                yield event
        finally:
            end_stream(self.turn, self.request)

    async def whole(self) -> ApiDone:
        async for event in self.events():
            if isinstance(event, ApiDone):
                self.logged(200, event)
                return event
            if isinstance(event, ApiError):
                raise event
            if isinstance(event, ApiFailed):
                raise of_kind(event.kind, event.message)
        raise ApiError(500, "The turn ended without an answer.", type="server_error")

    def logged(self, status: int, done: ApiDone | None = None, note: str = "") -> None:
        log_request(self.service, self.request, status, self.started, self.chat, done, note)


def read_request(
    service: ApiService,
    request: Request,
    openai_body: Mapping[str, Any],
    model_name: Any,
    label: str,
) -> tuple[OfferedModel | None, ModelFacts, ApiChat]:
    """The model ``openai_body`` (a request translated to OpenAI's shape) names, its
    facts, and the request read against them."""
    model: OfferedModel | None = chosen_model(service, model_name)
    facts = service.facts(model)
    chat = read_chat(
        dict(openai_body),
        request.headers,
        base=service.app.settings.sampler,
        n_ctx=facts.n_ctx,
        tool_format=facts.tool_format,
        label=label,
    )
    return model, facts, chat


async def start_turn(
    service: ApiService,
    request: Request,
    openai_body: Mapping[str, Any],
    model_name: Any,
    label: str,
) -> StartedTurn:
    """Read ``openai_body`` (a request translated to OpenAI's shape) and start its turn."""
    started = time.monotonic()
    model, facts, chat = read_request(service, request, openai_body, model_name, label)
    turn = TurnStream(service, chat, model)
    first = await first_event(turn, request)
    return StartedTurn(
        service, request, chat, turn, first, model.id if model else facts.id, started
    )
