"""Text to speech: a sentence in, 16-bit mono PCM out, through sherpa-onnx and a Piper voice.

sherpa-onnx (Apache-2.0) runs the voice's ONNX model; the phonemes it is given come
from eSpeak NG (``espeak_phonemes``), the one GPL piece, installed by the user.
Give it sentences that ``speech_text`` made speakable.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

import numpy as np

from vllmchat.core.voice.espeak_phonemes import EspeakPhonemizer
from vllmchat.core.voice.models import PiperVoice, piper_voice

# Slower than half speed or faster than twice is hard to follow.
MIN_SPEED, MAX_SPEED = 0.5, 2.0


class SpeakerUnavailable(RuntimeError):
    """Text to speech cannot run here (sherpa-onnx, the voice or eSpeak NG missing)."""


@dataclass(frozen=True)
class Speech:
    """One sentence spoken: 16-bit little-endian mono PCM at ``sample_rate``."""

    text: str
    pcm: bytes
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


class Speaker:
    """One voice, loaded once; ``speak`` turns a sentence into PCM."""

    def __init__(self, voice: PiperVoice | None = None, *, threads: int = 2) -> None:
        try:
            sherpa: Any = import_module("sherpa_onnx")
        except ImportError as exc:
            raise SpeakerUnavailable("pip install sherpa-onnx (text to speech)") from exc
        self.voice = voice or piper_voice()
        self._phonemizer = EspeakPhonemizer(self.voice.espeak_voice)
        vits = sherpa.OfflineTtsVitsModelConfig(
            model=str(self.voice.model), tokens=str(self.voice.tokens)
        )
        model = sherpa.OfflineTtsModelConfig(vits=vits, num_threads=threads, provider="cpu")
        self._tts = sherpa.OfflineTts(sherpa.OfflineTtsConfig(model=model))
        self._generation = sherpa.GenerationConfig
        self.sample_rate = int(self._tts.sample_rate)

    def speak(self, sentence: str, *, speed: float = 1.0) -> Speech:
        """``sentence`` as speech; no audio for text with nothing to say."""
        phonemes = self._phonemizer.phonemes(sentence)
        if not any(ch.isalpha() for ch in phonemes):
            return Speech(sentence, b"", self.sample_rate)
        config = self._generation()
        config.sid = 0
        config.speed = min(max(speed, MIN_SPEED), MAX_SPEED)
        config.phoneme_codepoints = [[ord(ch) for ch in phonemes]]
        audio = self._tts.generate(sentence, config)
        samples = np.asarray(audio.samples, dtype=np.float32)
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        return Speech(sentence, pcm, int(audio.sample_rate))
