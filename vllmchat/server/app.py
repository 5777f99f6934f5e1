"""The server's routes and door, as one ASGI application."""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from vllmchat.core.app.serving.service import ApiService, RequestLogged
from vllmchat.server.door import Door, DoorPolicy
from vllmchat.server.errors import ApiError
from vllmchat.server.openai_routes import OpenAiRoutes


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    message = (
        f"There is no {request.method} {request.url.path} here."
        if status in (404, 405)
        else str(getattr(exc, "detail", "The request failed."))
    )
    return ApiError(
        status, message, code="not_found" if status == 404 else "method_not_allowed"
    ).response()


async def _internal(request: Request, exc: Exception) -> Response:
    return JSONResponse(
        {
            "error": {
                "message": f"The server failed: {exc!r}",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
        status_code=500,
    )


def build_app(service: ApiService, policy: DoorPolicy) -> Door:
    """The API on ``service``, behind a door with ``policy``."""
    from vllmchat.server.anthropic_routes import AnthropicRoutes
    from vllmchat.server.audio_routes import AudioRoutes
    from vllmchat.server.ollama_routes import OllamaRoutes
    from vllmchat.server.responses_routes import ResponsesRoutes

    openai = OpenAiRoutes(service)
    anthropic = AnthropicRoutes(service)
    ollama = OllamaRoutes(service)
    responses = ResponsesRoutes(service)
    audio = AudioRoutes(service)
    routes = [
        Route("/health", openai.health, methods=["GET"]),
        Route("/v1/models", openai.models, methods=["GET"]),
        Route("/v1/chat/completions", openai.chat_completions, methods=["POST"]),
        Route("/v1/completions", openai.completions, methods=["POST"]),
        Route("/v1/embeddings", openai.embeddings, methods=["POST"]),
        Route("/v1/audio/transcriptions", audio.logged(audio.transcriptions), methods=["POST"]),
        Route("/v1/audio/translations", audio.logged(audio.translations), methods=["POST"]),
        Route("/v1/audio/speech", audio.logged(audio.speech), methods=["POST"]),
        Route("/v1/messages", anthropic.messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", anthropic.count_tokens, methods=["POST"]),
        Route("/v1/responses", responses.create, methods=["POST"]),
        Route("/api/chat", ollama.chat, methods=["POST"]),
        Route("/api/generate", ollama.generate, methods=["POST"]),
        Route("/api/tags", ollama.tags, methods=["GET"]),
        Route("/api/show", ollama.show, methods=["POST"]),
        Route("/api/ps", ollama.ps, methods=["GET"]),
        Route("/api/version", ollama.version, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            404: _not_found,
            405: _not_found,
            Exception: _internal,
        },
    )
    inner = (
        CORSMiddleware(
            app,
            allow_origins=list(policy.origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=[
                "authorization",
                "content-type",
                "x-api-key",
                "x-client-id",
                "anthropic-version",
            ],
        )
        if policy.origins
        else app
    )
    return Door(inner, policy, lambda scope, error: _log_refusal(service, scope, error))


def _log_refusal(service: ApiService, scope: Scope, error: ApiError) -> None:
    """A request the door turned away, in the request log (a client without its key)."""
    client = scope.get("client") or ("", 0)
    service.log.tell(
        RequestLogged(
            time.time(),
            str(client[0]),
            f"{scope.get('method', '')} {scope.get('path', '')}",
            error.status,
            note=error.message,
        )
    )
