"""The pieces of speech waiting to be played, already in the output's format (Qt-free)."""

from __future__ import annotations

from collections import deque

from vllmchat.audio.pcm import PcmFormat, convert


class PlaybackQueue:
    """Pieces of 16-bit mono PCM, converted to the output's format as they are added."""

    def __init__(self, output: PcmFormat) -> None:
        self.output = output
        self._pieces: deque[bytes] = deque()
        self._size = 0

    def add(self, pcm: bytes, sample_rate: int) -> None:
        """A piece of 16-bit mono PCM at ``sample_rate`` (resampled to the output's rate)."""
        converted = convert(pcm, PcmFormat(sample_rate, 1, "<i2"), self.output)
        if converted:
            self._pieces.append(converted)
            self._size += len(converted)

    def take(self, size: int) -> bytes:
        """Up to ``size`` bytes from the front, whole frames only."""
        size -= size % self.output.bytes_per_frame
        taken: list[bytes] = []
        while self._pieces and size > 0:
            piece = self._pieces.popleft()
            if len(piece) > size:
                piece, rest = piece[:size], piece[size:]
                self._pieces.appendleft(rest)
            taken.append(piece)
            size -= len(piece)
        data = b"".join(taken)
        self._size -= len(data)
        return data

    def clear(self) -> None:
        self._pieces.clear()
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def seconds(self) -> float:
        return self.output.seconds(self._size)
