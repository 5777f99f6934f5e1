"""Raw audio converted between a device's format and the voice's: Qt-free, on numpy.

The voice speaks and hears 16-bit little-endian mono PCM (``MIC_FORMAT`` at 16 kHz for
the recogniser, the voice's own rate for speech). A device may only offer another
rate, channel count or sample type (48 kHz stereo float is common): ``PcmConverter``
turns a stream of chunks from one format into the other, keeping the state that
crosses chunk boundaries (a partial frame, the resampler's position and filter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# numpy's names for the sample types devices offer, and each one's full scale.
_SCALE = {"u1": 128.0, "<i2": 32768.0, "<i4": 2147483648.0, "<f4": 1.0}
_FILTER_TAPS = 63  # the anti-alias filter's length when the rate goes down


@dataclass(frozen=True)
class PcmFormat:
    """Interleaved PCM: frames per second, channels, and the sample's numpy type."""

    sample_rate: int
    channels: int = 1
    sample_type: str = "<i2"

    def __post_init__(self) -> None:
        if self.sample_type not in _SCALE:
            raise ValueError(f"unsupported sample type {self.sample_type!r}")
        if self.sample_rate <= 0 or self.channels <= 0:
            raise ValueError("a sample rate and at least one channel are needed")

    @property
    def bytes_per_frame(self) -> int:
        return np.dtype(self.sample_type).itemsize * self.channels

    def seconds(self, size: int) -> float:
        """How long ``size`` bytes of this format play."""
        return size / self.bytes_per_frame / self.sample_rate


MIC_FORMAT = PcmFormat(16000, 1, "<i2")


def to_float(data: bytes, fmt: PcmFormat) -> np.ndarray:
    """Whole frames of ``data`` as mono float32 in -1..1 (the channels averaged)."""
    usable = len(data) - len(data) % fmt.bytes_per_frame
    samples = np.frombuffer(data[:usable], dtype=fmt.sample_type).astype(np.float32)
    if fmt.sample_type == "u1":
        samples -= 128.0
    samples /= _SCALE[fmt.sample_type]
    if fmt.channels > 1:
        samples = samples.reshape(-1, fmt.channels).mean(axis=1)
    return samples


def from_float(samples: np.ndarray, fmt: PcmFormat) -> bytes:
    """Mono float samples written as ``fmt`` (the one channel copied to every channel)."""
    clipped = np.clip(samples, -1.0, 1.0)
    if fmt.sample_type == "<f4":
        encoded = clipped.astype("<f4")
    else:
        scale = _SCALE[fmt.sample_type]
        top = scale - 1
        values = np.clip(np.round(clipped * scale), -scale, top)
        if fmt.sample_type == "u1":
            values += 128.0
        encoded = values.astype(fmt.sample_type)
    if fmt.channels > 1:
        encoded = np.repeat(encoded, fmt.channels)
    return bytes(encoded.tobytes())


def rms_level(pcm16: bytes) -> float:
    """The loudness of 16-bit mono PCM as its RMS, 0 (silence) to 1 (full scale)."""
    samples = np.frombuffer(pcm16[: len(pcm16) - len(pcm16) % 2], dtype="<i2")
    if not samples.size:
        return 0.0
    rms = float(np.sqrt(np.mean(np.square(samples.astype(np.float64))))) / 32768.0
    return min(rms, 1.0)


class StreamResampler:
    """Mono float samples from one rate to another, chunk after chunk, without seams.

    Linear interpolation between input samples; when the rate goes down, a windowed-
    sinc low-pass filter first removes what the lower rate cannot carry (aliasing).
    """

    def __init__(self, rate_in: int, rate_out: int) -> None:
        self.rate_in, self.rate_out = rate_in, rate_out
        self._step = rate_in / rate_out
        self._position = 0.0  # of the next output sample, in ``self._pending``
        self._pending = np.zeros(0, dtype=np.float32)
        self._filter = _low_pass(rate_out / 2 * 0.9 / rate_in) if rate_out < rate_in else None
        self._history = np.zeros(_FILTER_TAPS - 1, dtype=np.float32)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """The output samples that ``samples`` (and what came before) make now."""
        if self.rate_in == self.rate_out or not len(samples):
            return samples
        if self._filter is not None:
            padded = np.concatenate([self._history, samples])
            self._history = padded[len(padded) - (_FILTER_TAPS - 1) :]
            samples = np.convolve(padded, self._filter, mode="valid").astype(np.float32)
        buffer = np.concatenate([self._pending, samples])
        last = len(buffer) - 1
        if last < 1:
            self._pending = buffer
            return np.zeros(0, dtype=np.float32)
        count = max(0, int(np.floor((last - 1e-9 - self._position) / self._step)) + 1)
        positions = self._position + self._step * np.arange(count)
        out: np.ndarray = np.interp(positions, np.arange(len(buffer)), buffer).astype(np.float32)
        following = self._position + self._step * count
        consumed = min(int(np.floor(following)), last)
        self._pending = buffer[consumed:]
        self._position = following - consumed
        return out


def _low_pass(cutoff: float) -> np.ndarray:
    """A Hann-windowed sinc low-pass filter; ``cutoff`` in cycles per input sample."""
    n = np.arange(_FILTER_TAPS) - (_FILTER_TAPS - 1) / 2
    taps: np.ndarray = 2 * cutoff * np.sinc(2 * cutoff * n) * np.hanning(_FILTER_TAPS)
    normalised: np.ndarray = (taps / taps.sum()).astype(np.float32)
    return normalised


class PcmConverter:
    """A stream of chunks in ``source`` format, converted to ``target`` (mono in between)."""

    def __init__(self, source: PcmFormat, target: PcmFormat) -> None:
        self.source, self.target = source, target
        self._partial = b""  # a frame split across two chunks
        self._resampler = StreamResampler(source.sample_rate, target.sample_rate)

    @property
    def passthrough(self) -> bool:
        return self.source == self.target

    def feed(self, data: bytes) -> bytes:
        """``data`` converted (whole frames; a trailing partial frame waits for the next)."""
        if self.passthrough:
            return data
        data = self._partial + data
        usable = len(data) - len(data) % self.source.bytes_per_frame
        self._partial = data[usable:]
        if self.source.channels == 1 and self.target.channels == 1:
            same_type = self.source.sample_type == self.target.sample_type
            if same_type and self.source.sample_rate == self.target.sample_rate:
                return data[:usable]
        samples = self._resampler.feed(to_float(data[:usable], self.source))
        return from_float(samples, self.target)


def convert(data: bytes, source: PcmFormat, target: PcmFormat) -> bytes:
    """One whole piece of audio converted from ``source`` to ``target``."""
    return PcmConverter(source, target).feed(data)
