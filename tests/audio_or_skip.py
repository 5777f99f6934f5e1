"""Import the audio device layer, or skip the module saying why it cannot load here."""

from __future__ import annotations

import pytest

from vllmchat.audio.errors import AudioUnavailable


def require_qt_audio() -> None:
    """Skip the calling test module, with the true cause, only where Qt Multimedia
    cannot be imported (its extra or a system library missing): never silently."""
    try:
        import vllmchat.audio.qt_audio  # noqa: F401
    except AudioUnavailable as exc:
        pytest.skip(f"audio devices cannot be tested here: {exc}", allow_module_level=True)
