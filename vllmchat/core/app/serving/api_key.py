"""The local API's key: made on request, kept in the OS keyring (never in settings)."""

from __future__ import annotations

import secrets

from vllmchat.core.engine.remote.servers import api_key, forget_api_key, store_api_key

KEY_NAME = "local-api-server"  # the keyring entry's name under the app's service


def server_key() -> str:
    """The key clients must send ("" when none is set)."""
    return api_key(KEY_NAME) or ""


def new_server_key() -> tuple[str, str | None]:
    """A fresh random key, kept; and a warning when the keyring could not keep it."""
    key = "vc-" + secrets.token_urlsafe(24)
    return key, store_api_key(KEY_NAME, key)


def set_server_key(key: str) -> str | None:
    """Keep ``key`` (empty: forget the key); a warning when it is kept for this session only."""
    if not key:
        forget_api_key(KEY_NAME)
        return None
    return store_api_key(KEY_NAME, key)
