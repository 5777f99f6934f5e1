"""A conversation written to a file, for every front end (Markdown or JSON by the
file's suffix; a JSON export imports back as a new conversation)."""

from __future__ import annotations

from pathlib import Path

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.conversations.transfer import export_file


def export_conversation(app: ChatApp, conversation_id: int, path: str | Path) -> Path:
    """Write the conversation to ``path`` (``.md`` or ``.json``); returns the path
    written. Raises ``StoreError`` (no such conversation) or ``OSError``."""
    return export_file(app.store, conversation_id, path)
