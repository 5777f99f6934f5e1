"""What every route does first: read the JSON body, find the model, start the turn
and wait for its first event while watching the client."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from starlette.requests import Request

from vllmchat.core.app.engine_queue import GaveUp, QueueFull
from vllmchat.core.app.serving.api_turn import ApiChat, ApiEvent, ApiFailed
from vllmchat.core.app.serving.models_on_offer import OfferedModel, find_model
from vllmchat.core.app.serving.service import ApiService, ModelFacts, RequestLogged
from vllmchat.core.engine.events import EngineError
from vllmchat.server.errors import ApiError, not_served, of_kind
from vllmchat.server.json_depth import MAX_DEPTH, nests_deeper
from vllmchat.server.turn_stream import TurnStream

INLINE_BYTES = 64 * 1024  # a body this small is read on the loop (its thread costs more)


async def json_body(request: Request) -> Any:
    """The request's JSON; a wrong content type, malformed JSON or a body nesting more
    than ``MAX_DEPTH`` arrays and objects is a 400 (a large body is read off the loop,
    so that it does not hold up the other requests)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(
            415 if kind else 400,
            f"The body must be JSON (Content-Type: application/json), not {kind or 'none'}.",
            code="unsupported_media_type" if kind else "invalid_request",
        )
    raw = await request.body()
    if len(raw) <= INLINE_BYTES:
        return parse_json(raw)
    return await anyio.to_thread.run_sync(parse_json, raw)


def parse_json(raw: bytes) -> Any:
    """``raw`` parsed, its depth measured first (``json`` recurses once per level)."""
    try:
        if nests_deeper(raw, MAX_DEPTH):
            raise ApiError(
                400,
                f"The body nests arrays and objects more than {MAX_DEPTH} levels deep.",
                code="json_too_deep",
            )
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise ApiError(400, "The body is not UTF-8 text.", code="invalid_json") from exc
    except ValueError as exc:
        raise ApiError(400, f"The body is not valid JSON: {exc}.", code="invalid_json") from exc


T = TypeVar("T")


async def in_queue(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` on a thread (where it waits its turn in the engine's queue); the
    queue's refusals and the engine's failures become the errors they are answered with."""
    try:
        return await anyio.to_thread.run_sync(work, *args)
    except (QueueFull, GaveUp) as exc:
        raise not_served(exc) from exc
    except EngineError as exc:
        raise of_kind(exc.kind, exc.message) from exc


def chosen_model(service: ApiService, name: Any) -> OfferedModel | None:
    """The model a request names (None: the loaded one); 404 listing what exists."""
    if name is None or name == "":
        return None
    if not isinstance(name, str):
        raise ApiError(400, "'model' must be a string.", param="model")
    models = service.models()
    found = find_model(models, name)
    if found is None:
        known = ", ".join(m.id for m in models) or "none"
        raise ApiError(
            404,
            f"The model {name!r} does not exist here. Models: {known}.",
            code="model_not_found",
            param="model",
        )
    return found


def facts_of(service: ApiService, model: OfferedModel | None) -> ModelFacts:
    return service.facts(model)


async def first_event(stream: TurnStream, request: Request) -> ApiEvent:
    """The turn's first event (it waits its place in the queue); the client's leaving
    meanwhile cancels it."""
    waiting = asyncio.ensure_future(stream.__anext__())
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=0.1)
        if done:
            item = waiting.result()
            break
        if await request.is_disconnected():
            waiting.cancel()
            end_stream(stream, request)
            raise ApiError(499, "The client left.", code="client_closed")
    if isinstance(item, ApiError):
        raise item
    if isinstance(item, ApiFailed):
        raise of_kind(item.kind, item.message)
    event: ApiEvent = item
    return event


def end_stream(stream: TurnStream, request: Request) -> None:
    """The route is done with ``stream``: a turn whose client left before its last event
    stops, and the request log says so (499, as nginx logs a client that closed)."""
    if stream.ended:
        return
    stream.cancel()
    waited = time.monotonic() - stream.started
    where = (
        f"mid-reply, after {stream.sent_chars} characters"
        if stream.sent_chars
        else "before its first token"
    )
    note = f"The client left {where} ({waited:.1f} s after it asked)."
    log_request(stream.service, request, 499, stream.started, stream.chat, note=note)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def log_request(
    service: ApiService,
    request: Request,
    status: int,
    started: float,
    chat: ApiChat | None = None,
    done: Any = None,
    note: str = "",
) -> None:
    """Tell the service's listeners (the window's log) about an answered request."""
    client = chat.client if chat is not None and chat.client else ""
    usage = getattr(done, "usage", None)
    host = request.client.host if request.client is not None else ""
    service.log.tell(
        RequestLogged(
            time.time(),
            client or host,
            f"{request.method} {request.url.path}",
            status,
            getattr(usage, "prompt", 0),
            getattr(usage, "cached", 0),
            getattr(usage, "completion", 0),
            time.monotonic() - started,
            note,
            getattr(done, "place_s", 0.0) * 1000,
            getattr(done, "ttft_s", 0.0) * 1000,
            getattr(done, "decode_tok_s", 0.0),
        )
    )
