"""The voice's events as the front ends see them: what was heard, what is spoken."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartialTranscript:
    """The words heard so far while the user is still speaking (replaced by the next)."""

    text: str


@dataclass(frozen=True)
class SpeechEnded:
    """The user stopped speaking (silence, or the key released): the transcript follows."""

    audio_s: float


@dataclass(frozen=True)
class Heard:
    """What the user said ("" when nothing was heard), its language and the audio's length."""

    text: str
    language: str
    audio_s: float


@dataclass(frozen=True)
class ListenFailed:
    """The recording could not be transcribed; ``message`` says why in one line. The
    recording itself is kept (``ListenSession.audio``)."""

    message: str


@dataclass(frozen=True)
class SpokenPiece:
    """A sentence (or a part of a long one) spoken: 16-bit mono PCM at ``sample_rate``."""

    text: str
    pcm: bytes
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate if self.sample_rate else 0.0


@dataclass(frozen=True)
class SpeakingEnded:
    """Nothing more will be spoken of this reply; ``stopped``: cut short by ``stop_speaking``."""

    stopped: bool


@dataclass(frozen=True)
class SpeakFailed:
    """The voice cannot speak (not installed, or it failed); ``message`` says why in one line."""

    message: str


ListenEvent = PartialTranscript | SpeechEnded | Heard | ListenFailed
SpeakEvent = SpokenPiece | SpeakingEnded | SpeakFailed
VoiceEvent = ListenEvent | SpeakEvent
