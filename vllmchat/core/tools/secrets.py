"""Secret env values and headers of MCP servers, kept in the OS keyring.

The same keyring service as servers' API keys (``engine/servers.py``); each secret
is stored under ``mcp:<server>:<env|header>:<name>``. Where no keyring backend
exists the value is kept for this session only and the caller is told so.
"""

from __future__ import annotations

import contextlib

import keyring
import keyring.errors

SERVICE = "vllmchat"
_SESSION: dict[str, str] = {}

NO_KEYRING = (
    "No system keyring is available, so MCP server secrets are kept for this session only "
    "(install a Secret Service provider such as GNOME Keyring or KWallet to keep them)."
)


def secret_key(server: str, kind: str, name: str) -> str:
    """The keyring user name of one secret (``kind``: ``env`` or ``header``)."""
    return f"mcp:{server}:{kind}:{name}"


def store_secret(key: str, value: str) -> str | None:
    """Keep ``value``; returns a warning when it could not be stored durably."""
    _SESSION[key] = value
    try:
        keyring.set_password(SERVICE, key, value)
    except keyring.errors.KeyringError:
        return NO_KEYRING
    return None


def read_secret(key: str) -> str | None:
    if key in _SESSION:
        return _SESSION[key]
    try:
        return keyring.get_password(SERVICE, key)
    except keyring.errors.KeyringError:
        return None


def forget_secret(key: str) -> None:
    _SESSION.pop(key, None)
    with contextlib.suppress(keyring.errors.KeyringError):
        keyring.delete_password(SERVICE, key)
