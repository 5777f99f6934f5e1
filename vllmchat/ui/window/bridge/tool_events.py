"""The tools layer's events as signals: ``AppEvents`` carries them with every other
event type (``events.tools`` is the same object); ``ToolEvents`` is its older name."""

from __future__ import annotations

from vllmchat.ui.window.bridge.app_events import AppEvents as ToolEvents

__all__ = ["ToolEvents"]
