"""Where speech starts and ends in microphone audio: frame energy over an adaptive noise floor.

Frames of 30 ms are compared with the room's noise floor, which follows quiet frames
(down at once, up slowly, so a fan or traffic is learnt and not taken for speech).
Speech starts after a few loud frames in a row, so a click is not a start. Whisper's own
voice filter (Silero) still decides which words are transcribed.
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
FRAME = 480  # 30 ms at 16 kHz
# Louder than this many times the noise floor, and than an absolute floor (about -48 dBFS).
_RATIO = 3.0
_MIN_LEVEL = 0.004
# Loud frames in a row that start speech (90 ms).
_START_FRAMES = 3
# How fast the floor rises over quiet frames (it drops at once).
_RISE = 0.05


class EnergyVad:
    """Fed 30 ms frames in order; tells whether speech has begun and how long since it paused."""

    def __init__(self) -> None:
        self._floor: float | None = None
        self._loud_run = 0
        self.frames = 0
        self.speech_started = False
        self.last_voiced_end = 0  # the sample after the last voiced frame
        self.speech_samples = 0  # voiced samples heard so far

    def push(self, frame: bytes) -> bool:
        """Whether this frame (``FRAME`` 16-bit samples) is voiced."""
        samples = np.frombuffer(frame, dtype="<i2").astype(np.float32) / 32768.0
        level = float(np.sqrt(np.mean(samples * samples))) if samples.size else 0.0
        self.frames += 1
        if self._floor is None:
            self._floor = level
        loud = level > max(self._floor * _RATIO, _MIN_LEVEL)
        if not loud:
            self._floor = (
                level if level < self._floor else self._floor + _RISE * (level - self._floor)
            )
        self._loud_run = self._loud_run + 1 if loud else 0
        voiced = loud and (self.speech_started or self._loud_run >= _START_FRAMES)
        if voiced:
            self.speech_started = True
            self.last_voiced_end = self.frames * FRAME
            self.speech_samples += FRAME
        return voiced

    @property
    def heard_s(self) -> float:
        return self.frames * FRAME / SAMPLE_RATE

    @property
    def silence_s(self) -> float:
        """Seconds since the last voiced frame (since the start when none was voiced)."""
        return (self.frames * FRAME - self.last_voiced_end) / SAMPLE_RATE
