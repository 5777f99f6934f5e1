"""The speech recogniser's child process: faster-whisper, loaded once, one request at a time.

Whisper invents words where there are none ("Thank you." over silence): its voice
activity filter (Silero VAD) cuts silence and noise out before decoding, and
segments that Whisper itself thinks hold no speech are dropped.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from importlib import import_module
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import numpy as np

from vllmchat.core.voice.events import (
    TranscriptionDone,
    TranscriptionFailed,
    TranscriptionProgress,
    TranscriptSegment,
)
from vllmchat.core.voice.whisper_model import whisper_model

SAMPLE_RATE = 16000  # what Whisper hears
# A segment Whisper rates this likely to be no speech, and this unsure of, is dropped.
_NO_SPEECH = 0.5
_UNSURE_LOGPROB = -0.8
# What Whisper says over silence and noise, learnt from subtitles.
_FILLERS = re.compile(
    r"^\W*(thank you( (so much|very much))?( for watching)?|thanks for watching|you|bye"
    r"|subtitles by .*|\.+)\W*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class AudioRequest:
    """One transcription: a file, or 16-bit PCM with its rate and channels."""

    path: str | None
    pcm: bytes | None
    sample_rate: int
    channels: int
    language: str | None
    beam_size: int


def serve(conn: Connection, cancel: Event, model_dir: str, threads: int) -> None:
    """Answer requests on ``conn`` until it closes or ``None`` comes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's: it cancels
    model: Any = None
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        try:
            if model is None:
                try:
                    model = whisper_model(model_dir, threads)
                except ImportError as exc:
                    raise RuntimeError(
                        "speech to text needs faster-whisper: pip install 'vllmchat[voice]'"
                    ) from exc
                except Exception as exc:  # a damaged or incomplete model file
                    name = Path(model_dir).name
                    raise RuntimeError(
                        f"the speech model {name} cannot be loaded ({_one_line(exc)}): "
                        f"download it again (`vllmchat voice {name}`)"
                    ) from exc
            _transcribe(conn, cancel, model, request)
        except Exception as exc:  # every failure goes back as one line
            conn.send(TranscriptionFailed(_one_line(exc)))


def _transcribe(conn: Connection, cancel: Event, model: Any, request: AudioRequest) -> None:
    audio = _audio(request)
    total = len(audio) / SAMPLE_RATE
    segments, info = model.transcribe(
        audio,
        language=request.language,
        beam_size=request.beam_size,
        vad_filter=True,
        condition_on_previous_text=False,
        no_speech_threshold=0.6,
    )
    texts: list[str] = []
    conn.send(TranscriptionProgress(0.0, total))
    for segment in segments:  # each decoded segment is kept, even one decoded past a cancel
        text = segment.text.strip()
        if text and not _invented(segment, text):
            texts.append(text)
            conn.send(TranscriptSegment(text, float(segment.start), float(segment.end)))
        conn.send(TranscriptionProgress(min(float(segment.end), total), total))
        if cancel.is_set():
            conn.send(TranscriptionDone(" ".join(texts), info.language, total, cancelled=True))
            return
    conn.send(TranscriptionDone(" ".join(texts), info.language, total))


def _invented(segment: Any, text: str) -> bool:
    """Whether a segment is Whisper's habit rather than speech."""
    no_speech = float(segment.no_speech_prob)
    if no_speech > _NO_SPEECH and float(segment.avg_logprob) < _UNSURE_LOGPROB:
        return True
    return bool(_FILLERS.match(text)) and no_speech > 0.1


def _audio(request: AudioRequest) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The request's audio as 16 kHz mono float32 (any rate and channel count in)."""
    if request.path is not None:
        decode = import_module("faster_whisper.audio").decode_audio
        try:
            samples = decode(request.path, sampling_rate=SAMPLE_RATE)
        except Exception as exc:
            reason = re.sub(r"\[Errno -?\d+\]\s*", "", _one_line(exc))
            reason = reason.replace(f": '{request.path}'", "")
            raise ValueError(f"{request.path}: not audio that can be read ({reason})") from exc
        return np.asarray(samples, dtype=np.float32)
    assert request.pcm is not None
    return pcm_to_whisper(request.pcm, request.sample_rate, request.channels)


def pcm_to_whisper(
    pcm: bytes, sample_rate: int, channels: int
) -> np.ndarray[Any, np.dtype[np.float32]]:
    """16-bit PCM, interleaved channels, any rate: mixed to mono and resampled to 16 kHz."""
    usable = len(pcm) - len(pcm) % (2 * channels)
    samples = np.frombuffer(pcm[:usable], dtype="<i2").astype(np.float32) / 32768.0
    mono = samples.reshape(-1, channels).mean(axis=1) if channels > 1 else samples
    if sample_rate == SAMPLE_RATE or mono.size == 0:
        return mono.astype(np.float32)
    count = round(mono.size * SAMPLE_RATE / sample_rate)
    if sample_rate > SAMPLE_RATE:  # average over each output step first (no aliasing)
        width = int(sample_rate // SAMPLE_RATE)
        mono = np.convolve(mono, np.ones(width, dtype=np.float32) / width, mode="same")
    positions = np.linspace(0, mono.size - 1, count)
    resampled: np.ndarray[Any, np.dtype[np.float32]]
    resampled = np.interp(positions, np.arange(mono.size), mono).astype(np.float32)
    return resampled


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
