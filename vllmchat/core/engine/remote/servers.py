"""Servers the user chats through: API keys in the OS keyring, warnings about plain HTTP.

Keys go to the OS keyring (the ``keyring`` package: Secret Service, KWallet,
macOS Keychain, Windows Credential Locker), never into ``settings.json``,
exports, logs or messages. Where no keyring backend exists the key is kept for
this session only, and the caller is told so.
"""

from __future__ import annotations

import contextlib
import ipaddress
from urllib.parse import urlparse

import keyring
import keyring.errors

SERVICE = "vllmchat"
_SESSION_KEYS: dict[str, str] = {}


def store_api_key(url: str, key: str) -> str | None:
    """Keep ``key`` for ``url``; returns a warning when it could not be stored durably."""
    _SESSION_KEYS[url] = key
    try:
        keyring.set_password(SERVICE, url, key)
    except keyring.errors.KeyringError:
        return (
            "No system keyring is available, so the API key is kept for this session only "
            "(install a Secret Service provider such as GNOME Keyring or KWallet to keep it)."
        )
    return None


def api_key(url: str) -> str | None:
    """The key stored for ``url``, if any."""
    if url in _SESSION_KEYS:
        return _SESSION_KEYS[url]
    try:
        return keyring.get_password(SERVICE, url)
    except keyring.errors.KeyringError:
        return None


def forget_api_key(url: str) -> None:
    _SESSION_KEYS.pop(url, None)
    with contextlib.suppress(keyring.errors.KeyringError):
        keyring.delete_password(SERVICE, url)


def url_warning(url: str) -> str | None:
    """A warning for plain ``http://`` to another host (keys and chats travel unencrypted)."""
    parsed = urlparse(url)
    if parsed.scheme != "http":
        return None if parsed.scheme == "https" else f"{url} is not an http(s) URL."
    host = parsed.hostname or ""
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        if host == "localhost":
            return None
    return (
        f"{url} is plain HTTP to another machine: the conversation and any API key "
        "travel unencrypted. Use https:// where the server offers it."
    )
