"""The application layer both front ends use: engine, chat session, KV states, settings."""

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    AppEvent,
    ConversationOpened,
    EngineDied,
    Loaded,
    LoadFailed,
    LoadStarted,
    SettingsChanged,
    StorageWarning,
    TitleMade,
    TurnStarted,
)

__all__ = [
    "AppEvent",
    "ChatApp",
    "ConversationOpened",
    "EngineDied",
    "LoadFailed",
    "LoadStarted",
    "Loaded",
    "SettingsChanged",
    "StorageWarning",
    "TitleMade",
    "TurnStarted",
]
