"""Speech as the client asked for it: WAV (its header from the ``wave`` module, sizes
"until the end" as streamed WAV is sent), raw PCM, or compressed as it comes through
PyAV's FFmpeg (installed with faster-whisper) where its encoder is there."""

from __future__ import annotations

import io
import struct
import wave
from typing import Any

# Compressed speech through PyAV's FFmpeg (installed with faster-whisper): codec,
# container, media type. Each is offered where its encoder is there.
ENCODED = {
    "mp3": ("libmp3lame", "mp3", "audio/mpeg"),
    "opus": ("libopus", "ogg", "audio/ogg"),
    "aac": ("aac", "adts", "audio/aac"),
    "flac": ("flac", "flac", "audio/flac"),
}


def audio_formats() -> list[str]:
    """The speech formats offered here: WAV and PCM, and those PyAV's FFmpeg encodes."""
    try:
        import av
    except ImportError:
        return ["wav", "pcm"]
    there = av.codecs_available
    return ["wav", "pcm", *(kind for kind, (codec, _, _) in ENCODED.items() if codec in there)]


class AudioShape:
    """Speech as raw PCM after a ``header`` (WAV's, or none)."""

    def __init__(self, header: bytes) -> None:
        self.header = header

    def media_type(self) -> str:
        return "audio/wav" if self.header else "audio/pcm"

    def begin(self, pcm: bytes) -> bytes:
        return self.header + pcm

    def more(self, pcm: bytes) -> bytes:
        return pcm

    def end(self) -> bytes:
        return b""


class Encoded(AudioShape):
    """Speech compressed as it comes (PyAV), each piece's packets sent when muxed."""

    def __init__(self, kind: str, rate: int) -> None:
        import av

        self._av = av
        codec, container, self._media = ENCODED[kind]
        self._written: list[bytes] = []
        self._rate = rate
        self._out = av.open(_Sink(self._written), mode="w", format=container)
        stream: Any = self._out.add_stream(codec, rate=48000 if kind == "opus" else rate)
        self._stream = stream
        self._stream.layout = "mono"
        self._resampler = av.AudioResampler(
            format=self._stream.format.name, layout="mono", rate=self._stream.rate
        )

    def media_type(self) -> str:
        return self._media

    def begin(self, pcm: bytes) -> bytes:
        return self.more(pcm)

    def more(self, pcm: bytes) -> bytes:
        import numpy as np

        samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
        frame = self._av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = self._rate
        self._encode(self._resampler.resample(frame))
        return self._taken()

    def end(self) -> bytes:
        self._encode(self._resampler.resample(None))
        self._encode([None])
        self._out.close()
        return self._taken()

    def _encode(self, frames: Any) -> None:
        for frame in frames:
            for packet in self._stream.encode(frame):
                self._out.mux(packet)

    def _taken(self) -> bytes:
        out = b"".join(self._written)
        self._written.clear()
        return out


class _Sink(io.RawIOBase):
    """Where the muxer writes: a list the encoder empties after each piece."""

    def __init__(self, written: list[bytes]) -> None:
        self._written = written

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._written.append(chunk)
        return len(chunk)


def wav_header(rate: int) -> bytes:
    """A 16-bit mono WAV header (the ``wave`` module's) whose sizes say "until the end"."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframesraw(b"")
    header = bytearray(buffer.getvalue())
    header[4:8] = header[40:44] = struct.pack("<I", 0xFFFFFFFF)
    return bytes(header)
