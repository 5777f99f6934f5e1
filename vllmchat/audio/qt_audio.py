"""Qt Multimedia's audio classes, from one place: ``AudioUnavailable`` where it is missing.

PySide6-Essentials alone has no Qt Multimedia; PySide6-Addons (the ``voice`` extra)
brings it, and it loads system libraries (PulseAudio's, ALSA's) the error names. The
states and errors are ``QtAudio``'s since Qt 6.7 (``QAudio``'s before,
and the old names no longer compare equal to what the sink and source return).
"""

from __future__ import annotations

from vllmchat.audio.errors import AudioUnavailable

try:
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtMultimedia import (
        QAudioDevice,
        QAudioFormat,
        QAudioSink,
        QAudioSource,
        QMediaDevices,
    )
except ImportError as exc:
    raise AudioUnavailable.from_import_error(exc) from exc

try:
    from PySide6.QtMultimedia import QtAudio
except ImportError:  # Qt 6.6
    from PySide6.QtMultimedia import QAudio as QtAudio  # type: ignore[assignment]


def deliver_audio() -> None:
    """Let Qt hand the recorder and the player their audio, where no window runs Qt's
    event loop (the terminal, the benchmarks)."""
    QCoreApplication.processEvents()


__all__ = [
    "QAudioDevice",
    "QAudioFormat",
    "QAudioSink",
    "QAudioSource",
    "QMediaDevices",
    "QtAudio",
    "deliver_audio",
]
