"""Errors in OpenAI's shape, with the status each cause deserves."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from vllmchat.core.app.engine_queue import GaveUp, QueueFull
from vllmchat.core.engine.events import ErrorKind

STATUS_OF_KIND: dict[ErrorKind, tuple[int, str, str]] = {
    ErrorKind.PROMPT_TOO_LONG: (400, "invalid_request_error", "context_length_exceeded"),
    ErrorKind.CONTEXT_FULL: (400, "invalid_request_error", "context_length_exceeded"),
    ErrorKind.BAD_REQUEST: (400, "invalid_request_error", "invalid_request"),
    ErrorKind.NO_VISION: (400, "invalid_request_error", "model_cannot_see_images"),
    ErrorKind.NO_MODEL: (503, "server_error", "no_model_loaded"),
    ErrorKind.MISSING_FILE: (404, "invalid_request_error", "model_not_found"),
    ErrorKind.OOM_LOAD: (503, "server_error", "out_of_memory"),
    ErrorKind.OOM_GENERATE: (503, "server_error", "out_of_memory"),
    ErrorKind.ENGINE_DIED: (503, "server_error", "engine_died"),
}


class ApiError(Exception):
    """An answer that is an error: status, message and OpenAI's type, code and param."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def of_kind(kind: ErrorKind, message: str) -> ApiError:
    """The error an engine or app failure is answered with."""
    status, type_, code = STATUS_OF_KIND.get(kind, (500, "server_error", kind.value))
    return ApiError(status, message, type=type_, code=code)


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def not_served(exc: QueueFull | GaveUp) -> ApiError:
    """A request the engine's queue did not serve: too many wait, or it waited too long."""
    if isinstance(exc, QueueFull):
        return ApiError(
            429,
            str(exc),
            type="rate_limit_error",
            code="queue_full",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    return ApiError(504, "The request waited too long for the model.", code="timeout")
