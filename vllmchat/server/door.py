"""The server's door: who may ask, from where, and how much.

- The ``Host`` header must name this server (an allow-list against DNS rebinding,
  CVE-2024-28224); a browser's ``Origin`` must be one the user listed.
- With a key (always, when listening on the LAN) every request but ``/health``
  carries it, as ``Authorization: Bearer`` or ``x-api-key``; it is compared in
  constant time.
- A body is read whole before the request is served: at most ``max_body`` bytes,
  within ``body_timeout_s`` (a slow upload is cut off).
Each refusal is answered in OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vllmchat.server.errors import ApiError

MAX_BODY = 20 * 1024 * 1024
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
OPEN_PATHS = frozenset({"/health", "/"})


@dataclass(frozen=True)
class DoorPolicy:
    """What the door lets in."""

    hosts: frozenset[str] = LOOPBACK_NAMES  # names the Host header may carry (no port)
    origins: tuple[str, ...] = ()  # browser origins allowed (CORS); none: no browser
    key: str = ""  # "" : no key is asked
    max_body: int = MAX_BODY
    body_timeout_s: float = 30.0
    open_paths: frozenset[str] = field(default=OPEN_PATHS)


def host_name(value: str) -> str:
    """The name in a Host header, without its port."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def presented_key(scope: Scope) -> str:
    """The key a request carries (Bearer or x-api-key), or ""."""
    auth = _header(scope, b"authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return (_header(scope, b"x-api-key") or "").strip()


class Door:
    """ASGI middleware applying a ``DoorPolicy`` before the app sees a request."""

    def __init__(
        self,
        app: ASGIApp,
        policy: DoorPolicy,
        refused: Callable[[Scope, ApiError], None] = lambda scope, error: None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.refused = refused  # told each refusal (the request log)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check(scope)
            receive = await self._read_body(scope, receive)
        except ApiError as exc:
            self.refused(scope, exc)
            await exc.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> None:
        policy = self.policy
        host = host_name(_header(scope, b"host") or "")
        if host not in policy.hosts:
            raise ApiError(
                403,
                f"This server does not answer to the host {host or '(none)'!r}.",
                type="permission_error",
                code="host_not_allowed",
            )
        origin = _header(scope, b"origin")
        if origin is not None and origin not in policy.origins and origin != "null":
            raise ApiError(
                403,
                f"Requests from {origin} are not allowed: list the origin in the server's "
                "settings (CORS).",
                type="permission_error",
                code="origin_not_allowed",
            )
        if origin == "null" and origin not in policy.origins:
            raise ApiError(
                403,
                "Requests from an opaque origin are not allowed.",
                type="permission_error",
                code="origin_not_allowed",
            )
        if (
            policy.key
            and scope.get("path") not in policy.open_paths
            and scope.get("method") != "OPTIONS"
        ):
            given = presented_key(scope)
            if not given:
                raise ApiError(
                    401,
                    "An API key is needed: send it as 'Authorization: Bearer KEY'.",
                    type="authentication_error",
                    code="missing_api_key",
                )
            if not hmac.compare_digest(given.encode(), policy.key.encode()):
                raise ApiError(
                    401,
                    "The API key is wrong.",
                    type="authentication_error",
                    code="invalid_api_key",
                )

    async def _read_body(self, scope: Scope, receive: Receive) -> Receive:
        """The whole body, within the size cap and the time limit, replayed to the app."""
        if scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return receive
        cap = self.policy.max_body
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > cap:
            raise _too_large(cap)
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.policy.body_timeout_s
        more = True
        while more:
            left = deadline - time.monotonic()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(left, 0.001))
            except asyncio.TimeoutError as exc:
                raise ApiError(
                    408,
                    f"The request's body did not arrive within {self.policy.body_timeout_s:g} s.",
                    code="request_timeout",
                ) from exc
            if message["type"] == "http.disconnect":
                raise ApiError(400, "The client left before sending its body.")
            body = message.get("body", b"")
            size += len(body)
            if size > cap:
                raise _too_large(cap)
            chunks.append(body)
            more = bool(message.get("more_body", False))
        whole = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()  # the disconnect, when the client leaves

        return replay


def _too_large(cap: int) -> ApiError:
    return ApiError(
        413, f"The request is larger than {cap // (1024 * 1024)} MB.", code="request_too_large"
    )


def allowed_hosts(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Host names for a server bound to ``bind``: loopback's, and on the LAN this
    machine's names and addresses."""
    names = set(LOOPBACK_NAMES) | {h.lower() for h in extra}
    if bind not in ("127.0.0.1", "localhost", "::1"):
        import socket

        names.add(bind.lower())
        hostname = socket.gethostname()
        names |= {hostname.lower(), socket.getfqdn().lower()}
        try:
            for info in socket.getaddrinfo(hostname, None):
                address: Any = info[4][0]
                names.add(str(address))
        except OSError:
            pass
        names |= _interface_addresses()
    return frozenset(names)


def _interface_addresses() -> set[str]:
    try:
        import psutil
    except ImportError:
        return set()
    found = set()
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family.name in ("AF_INET", "AF_INET6"):
                found.add(
                    a.address.split("%")[0]
                    if a.family.name == "AF_INET"
                    else f"[{a.address.split('%')[0]}]"
                )
    return found
