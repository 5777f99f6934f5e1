"""Why audio cannot be had: Qt Multimedia missing, or no device to record or play with."""

from __future__ import annotations

INSTALL_VOICE = "pip install 'vllmchat[voice]'"


class AudioUnavailable(ImportError):
    """Qt Multimedia (PySide6-Addons, in the ``voice`` extra) is not installed: raised by
    importing the audio modules, so that ``except ImportError`` catches it too."""

    def __init__(self, message: str = INSTALL_VOICE) -> None:
        super().__init__(message)


class NoAudioDevice(RuntimeError):
    """No microphone (or no speakers), or not the one asked for; the message says which."""
