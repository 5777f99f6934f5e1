"""The voice's real parts: a Piper voice (sherpa-onnx) speaks, Whisper (faster-whisper) hears."""

from __future__ import annotations

import re
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vllmchat.core.voice.events import (
    TranscriptionDone,
    TranscriptionFailed,
    TranscriptionProgress,
    TranscriptSegment,
)
from vllmchat.core.voice.models import VoiceModelMissing, _check
from vllmchat.core.voice.speaker import Speaker, Speech
from vllmchat.core.voice.transcriber import PcmAudio, Transcriber, transcript

SENTENCE = "Please turn off the lights in the kitchen before you leave."


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def _resampled(speech: Speech, rate: int) -> np.ndarray:
    samples = np.frombuffer(speech.pcm, dtype="<i2").astype(np.float32)
    count = int(len(samples) * rate / speech.sample_rate)
    positions = np.linspace(0, len(samples) - 1, count)
    return np.interp(positions, np.arange(len(samples)), samples).astype("<i2")


@pytest.fixture(scope="module")
def speech() -> Speech:
    return Speaker().speak(SENTENCE)


@pytest.fixture(scope="module")
def transcriber() -> Iterator[Transcriber]:
    with Transcriber() as recogniser:
        yield recogniser


def test_a_sentence_spoken_by_the_voice_comes_back_word_for_word(
    speech: Speech, transcriber: Transcriber
) -> None:
    assert 1.0 < speech.duration_s < 8.0
    events = list(transcriber.transcribe_pcm(PcmAudio(speech.pcm, speech.sample_rate)))
    assert isinstance(events[0], TranscriptionProgress)
    assert any(isinstance(e, TranscriptSegment) for e in events)
    done = events[-1]
    assert isinstance(done, TranscriptionDone)
    assert _words(done.text) == _words(SENTENCE)
    assert done.language == "en"


def test_8_khz_mono_and_48_khz_stereo_are_heard_alike(
    speech: Speech, transcriber: Transcriber, tmp_path: Path
) -> None:
    narrow = _resampled(speech, 8000)
    path = tmp_path / "phone.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(narrow.tobytes())
    from_file = transcript(transcriber.transcribe_file(path, language="en"))
    assert isinstance(from_file, TranscriptionDone)
    assert _words(from_file.text) == _words(SENTENCE)
    wide = _resampled(speech, 48000)
    stereo = np.stack([wide, wide], axis=1).reshape(-1).astype("<i2")
    recorded = transcript(transcriber.transcribe_pcm(PcmAudio(stereo.tobytes(), 48000, 2)))
    assert isinstance(recorded, TranscriptionDone)
    assert _words(recorded.text) == _words(SENTENCE)


def test_silence_and_noise_give_no_words(transcriber: Transcriber) -> None:
    silence = np.zeros(16000 * 30, dtype="<i2")
    noise = np.random.default_rng(7).normal(0, 2000, 16000 * 30).astype("<i2")
    for audio in (silence, noise):
        done = transcript(transcriber.transcribe_pcm(PcmAudio(audio.tobytes(), 16000)))
        assert isinstance(done, TranscriptionDone)
        assert done.text == ""
        assert done.duration_s == pytest.approx(30.0)


def test_an_empty_or_misnamed_file_is_a_one_line_message(
    transcriber: Transcriber, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    failed = transcript(transcriber.transcribe_file(empty))
    assert isinstance(failed, TranscriptionFailed)
    assert failed.message == f"{empty}: the file is empty (0 bytes), there is no audio in it"
    misnamed = tmp_path / "notes.mp3"
    misnamed.write_text("these are notes, not audio\n" * 20)
    failed = transcript(transcriber.transcribe_file(misnamed))
    assert isinstance(failed, TranscriptionFailed)
    assert failed.message.startswith(f"{misnamed}: not audio that can be read")
    assert "\n" not in failed.message
    missing = transcript(transcriber.transcribe_file(tmp_path / "gone.wav"))
    assert isinstance(missing, TranscriptionFailed) and "no such file" in missing.message
    # the recogniser is still there for the next request
    again = transcript(transcriber.transcribe_pcm(PcmAudio(b"\0\0" * 1600, 16000)))
    assert isinstance(again, TranscriptionDone) and again.text == ""


def test_a_damaged_model_file_is_told_by_its_hash(tmp_path: Path) -> None:
    damaged = tmp_path / "model.bin"
    damaged.write_bytes(b"not the model")
    with pytest.raises(VoiceModelMissing, match="does not match its SHA-256"):
        _check(damaged, "0" * 64)


def test_nothing_to_say_is_no_audio_and_speed_changes_the_length(speech: Speech) -> None:
    speaker = Speaker()
    assert speaker.speak("...").pcm == b""
    faster = speaker.speak(SENTENCE, speed=1.5)
    assert faster.duration_s < speech.duration_s * 0.85
