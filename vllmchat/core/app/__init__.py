"""The application layer both front ends use: engine, chat session, KV states, settings."""

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import (
    AppEvent,
    ConversationOpened,
    EngineDied,
    Loaded,
    LoadFailed,
    LoadStarted,
    PlacementFellBack,
    PlacementNeedsConfirmation,
    SettingsChanged,
    StorageWarning,
    TitleMade,
    TurnStarted,
)
from vllmchat.core.app.snapshot import AppSnapshot

__all__ = [
    "AppEvent",
    "AppSnapshot",
    "ChatApp",
    "ConversationOpened",
    "EngineDied",
    "LoadFailed",
    "LoadStarted",
    "Loaded",
    "PlacementFellBack",
    "PlacementNeedsConfirmation",
    "SettingsChanged",
    "StorageWarning",
    "TitleMade",
    "TurnStarted",
]
