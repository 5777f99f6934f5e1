"""The voice's real parts: a Piper voice (sherpa-onnx) speaks, Whisper (faster-whisper) hears."""

from __future__ import annotations

import re
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vllmchat.bench.voice.sentences import CHAT_SENTENCES
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
    # The voice's phoneme lengths are drawn with noise, so one sentence at 1.5x can come
    # out near 0.9 of its length at 1x; 1.5x against 0.75x is twice as fast by design.
    faster = speaker.speak(SENTENCE, speed=1.5)
    slower = speaker.speak(SENTENCE, speed=0.75)
    assert faster.duration_s < speech.duration_s < slower.duration_s * 1.1
    assert faster.duration_s < slower.duration_s * 0.8


def test_clipped_speech_is_still_heard(speech: Speech, transcriber: Transcriber) -> None:
    loud = np.frombuffer(speech.pcm, dtype="<i2").astype(np.int32) * 12
    clipped = loud.clip(-32768, 32767).astype("<i2")
    voiced = np.abs(loud) > 3000
    assert np.mean(np.abs(loud[voiced]) > 32767) > 0.1  # its loud part is cut flat
    done = transcript(transcriber.transcribe_pcm(PcmAudio(clipped.tobytes(), speech.sample_rate)))
    assert isinstance(done, TranscriptionDone)
    assert _words(done.text) == _words(SENTENCE)


def test_thank_you_said_is_kept_though_whisper_invents_it(transcriber: Transcriber) -> None:
    said = Speaker().speak("Thank you.")
    done = transcript(transcriber.transcribe_pcm(PcmAudio(said.pcm, said.sample_rate)))
    assert isinstance(done, TranscriptionDone)
    assert _words(done.text) == ["thank", "you"]


def test_a_long_recording_shows_progress_and_stops_when_cancelled(
    transcriber: Transcriber,
) -> None:
    speaker = Speaker()
    lines = CHAT_SENTENCES[:12]
    pause = np.zeros(speaker.sample_rate // 2, dtype="<i2").tobytes()
    once = b"".join(speaker.speak(line).pcm + pause for line in lines)
    long = once * 3  # about a minute and a half, different words in each window
    audio = PcmAudio(long, speaker.sample_rate)
    seen: list[object] = []
    for event in transcriber.transcribe_pcm(audio, language="en"):
        seen.append(event)
        if isinstance(event, TranscriptSegment):
            transcriber.cancel()
    done = seen[-1]
    assert isinstance(done, TranscriptionDone) and done.cancelled
    assert _words(done.text)[:4] == _words(lines[0])[:4]
    progress = [e for e in seen if isinstance(e, TranscriptionProgress)]
    assert progress[0].total_s == pytest.approx(len(long) / 2 / speaker.sample_rate, rel=0.01)
    assert progress[-1].done_s < progress[0].total_s / 2  # stopped well before the end
    # and the next request is answered in full
    again = transcript(transcriber.transcribe_pcm(PcmAudio(once, speaker.sample_rate)))
    assert isinstance(again, TranscriptionDone) and not again.cancelled
    assert len(_words(again.text)) > 0.8 * sum(len(_words(line)) for line in lines)


def test_word_errors_forgive_spelling_not_hearing() -> None:
    from vllmchat.bench.voice.scoring import normalized_words, scored, word_errors

    said = "It's 4 hours; the colour-blind Mr. Smith won't pay $50."
    heard = "it is four hours, the color blind mister Smith will not pay fifty dollars"
    assert word_errors(said, heard) == 0
    assert normalized_words("Smokey fires, 1,200 of them") == [
        "smoky",
        "fires",
        "one",
        "thousand",
        "two",
        "hundred",
        "of",
        "them",
    ]
    assert word_errors("Two blue fish swam in the tank.", "To Bluefish, we're in the tank.") == 4
    score = scored(
        ("A rod is used.", "Read verse out loud."), ["A ride is used.", "Reverse out loud."]
    )
    assert score.errors == 3 and score.words == 8 and score.wer == 0.375
    assert score.worst[0] == (2, "Read verse out loud.", "Reverse out loud.")
