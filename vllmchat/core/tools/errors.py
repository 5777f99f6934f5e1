"""Reasons a server or a call failed, in one line, from the SDK's exceptions."""

from __future__ import annotations

from typing import Any

from mcp import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED


def innermost(exc: BaseException) -> BaseException:
    """The first exception inside exception groups (the SDK's task groups)."""
    inner: Any = getattr(exc, "exceptions", None)
    while inner:  # an exception group
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def connection_closed(exc: BaseException) -> bool:
    """The server closed the connection (it exited), inside a group or not."""
    inner = innermost(exc)
    return isinstance(inner, MCPError) and inner.code == CONNECTION_CLOSED


def describe_error(exc: BaseException) -> str:
    """A one-line reason, looking inside exception groups."""
    exc = innermost(exc)
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, FileNotFoundError) and not exc.filename:  # ours: a missing command
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
