"""The voice's events: a transcription's progress, its text, its end or its failure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TranscriptionProgress:
    """How much of the audio has been heard, in seconds of audio."""

    done_s: float
    total_s: float


@dataclass(frozen=True)
class TranscriptSegment:
    """A stretch of speech recognised, with where it lies in the audio."""

    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class TranscriptionDone:
    """The whole transcript (empty when nothing was said), its language and the audio's length."""

    text: str
    language: str
    duration_s: float
    cancelled: bool = False


@dataclass(frozen=True)
class TranscriptionFailed:
    """The audio could not be transcribed; ``message`` says why in one line."""

    message: str


TranscriptionEvent = (
    TranscriptionProgress | TranscriptSegment | TranscriptionDone | TranscriptionFailed
)
