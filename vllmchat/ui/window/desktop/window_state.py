"""The window as it was left: its size, the splitter, and the open conversation (per
conversation database)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

from vllmchat.core.paths import config_dir


class WindowState:
    """``window.ini`` beside the settings: geometry, splitter, and the last conversation
    of the conversations' database ``database`` (each database keeps its own)."""

    def __init__(self, window: QMainWindow, split: QSplitter, database: Path) -> None:
        self.window, self.split, self.database = window, split, database

    def _file(self) -> QSettings:
        return QSettings(str(config_dir() / "window.ini"), QSettings.Format.IniFormat)

    def _conversation_key(self) -> str:
        digest = hashlib.sha256(str(self.database.resolve()).encode()).hexdigest()[:12]
        return f"conversation/{digest}"

    def restore(self) -> int | None:
        """Size, splitter positions; returns the conversation open when the app last closed."""
        state = self._file()
        geometry = state.value("geometry")
        if isinstance(geometry, QByteArray):
            self.window.restoreGeometry(geometry)
        split = state.value("splitter")
        if isinstance(split, QByteArray):
            self.split.restoreState(split)
        last = state.value(self._conversation_key())
        try:
            return int(last) if last is not None else None
        except (TypeError, ValueError):
            return None

    def save(self, conversation_id: int | None) -> None:
        state = self._file()
        state.setValue("geometry", self.window.saveGeometry())
        state.setValue("splitter", self.split.saveState())
        if conversation_id is not None:
            state.setValue(self._conversation_key(), conversation_id)
        state.sync()
