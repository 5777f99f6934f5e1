"""The recogniser's model detects a short recording's language from the encoding it decodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from vllmchat.core.voice.models import whisper_model_dir
from vllmchat.core.voice.speaker import Speaker
from vllmchat.core.voice.transcriber_process import pcm_to_whisper
from vllmchat.core.voice.whisper_model import whisper_model

faster_whisper = pytest.importorskip("faster_whisper")


@pytest.fixture(scope="module")
def audio() -> np.ndarray[Any, Any]:
    speech = Speaker().speak("Please turn off the lights in the kitchen before you leave.")
    return pcm_to_whisper(speech.pcm, speech.sample_rate, 1)


@pytest.fixture(scope="module")
def encodes() -> Iterator[list[int]]:
    """Every run of the encoder, counted by the shape of what it was given."""
    calls: list[int] = []
    original = faster_whisper.WhisperModel.encode

    def counted(self: Any, features: Any) -> Any:
        calls.append(features.shape[-1])
        return original(self, features)

    faster_whisper.WhisperModel.encode = counted
    yield calls
    faster_whisper.WhisperModel.encode = original


def _heard(model: Any, audio: np.ndarray[Any, Any], *, vad: bool = True) -> tuple[str, str]:
    segments, info = model.transcribe(audio, vad_filter=vad, condition_on_previous_text=False)
    return " ".join(s.text.strip() for s in segments), info.language


def test_detecting_the_language_encodes_a_short_recording_once_and_hears_the_same(
    audio: np.ndarray[Any, Any], encodes: list[int]
) -> None:
    folder = str(whisper_model_dir())
    stock = faster_whisper.WhisperModel(folder, device="cpu", compute_type="int8", cpu_threads=2)
    expected = _heard(stock, audio)
    assert len(encodes) == 2  # faster-whisper's own: once to detect, once to decode
    encodes.clear()
    ours = whisper_model(folder, 2)
    assert _heard(ours, audio) == expected
    assert expected[1] == "en" and "kitchen" in expected[0].lower()
    assert len(encodes) == 1
    encodes.clear()
    pause = np.zeros(16000 * 31, dtype=np.float32)  # kept: the voice filter is off
    _heard(ours, np.concatenate([audio, pause, audio]), vad=False)
    assert len(encodes) == 3  # past one window: detected the usual way, each window decoded
