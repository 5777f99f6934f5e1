"""Reasons a server or a call failed, in one line, from the SDK's exceptions."""

from __future__ import annotations

import sys
from typing import Any

CONNECTION_CLOSED = -32000  # mcp_types.jsonrpc's code: the server closed the connection


def _sdk_error(exc: BaseException) -> Any | None:
    """``exc`` as the SDK's ``MCPError`` (None when it is not one, or the SDK was never
    loaded: then nothing can have raised one)."""
    sdk = sys.modules.get("mcp")
    error_type = getattr(sdk, "MCPError", None)
    return exc if error_type is not None and isinstance(exc, error_type) else None


def innermost(exc: BaseException) -> BaseException:
    """The first exception inside exception groups (the SDK's task groups)."""
    inner: Any = getattr(exc, "exceptions", None)
    while inner:  # an exception group
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def connection_closed(exc: BaseException) -> bool:
    """The server closed the connection (it exited), inside a group or not."""
    inner = _sdk_error(innermost(exc))
    return inner is not None and inner.code == CONNECTION_CLOSED


def describe_error(exc: BaseException) -> str:
    """A one-line reason, looking inside exception groups."""
    exc = innermost(exc)
    sdk_error = _sdk_error(exc)
    if sdk_error is not None:
        return str(sdk_error.error.message)
    if isinstance(exc, FileNotFoundError) and not exc.filename:  # ours: a missing command
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
