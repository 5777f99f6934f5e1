"""The one speech recogniser of the app, asked one request at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from vllmchat.core.voice.events import TranscriptionDone, TranscriptionEvent, TranscriptionFailed
from vllmchat.core.voice.transcriber import PcmAudio, Transcriber, transcript


class Recogniser:
    """A ``Transcriber`` behind a lock: requests from several threads wait their turn."""

    def __init__(self, *, threads: int = 2) -> None:
        self._transcriber = Transcriber(threads=threads)
        self._lock = threading.Lock()
        self._warmed = False

    def file(self, path: Path, *, language: str | None) -> Iterator[TranscriptionEvent]:
        with self._lock:
            yield from self._transcriber.transcribe_file(path, language=language)

    def pcm(self, audio: PcmAudio, *, language: str | None) -> Iterator[TranscriptionEvent]:
        with self._lock:
            yield from self._transcriber.transcribe_pcm(audio, language=language)

    def heard(
        self, audio: PcmAudio, *, language: str | None, wait: bool = True
    ) -> TranscriptionDone | TranscriptionFailed | None:
        """The transcript of ``audio``; None when ``wait`` is False and another runs."""
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            return transcript(self._transcriber.transcribe_pcm(audio, language=language))
        finally:
            self._lock.release()

    def busy(self) -> bool:
        """Whether a request is under way (a partial transcript would have to wait)."""
        return self._lock.locked()

    def warm(self) -> None:
        """Start the recogniser and load its model in the background, once (a listening
        session's first words are then transcribed without waiting for the load)."""
        if self._warmed:
            return
        self._warmed = True
        silence = PcmAudio(bytes(3200), 16000)
        threading.Thread(
            target=lambda: self.heard(silence, language="en"),
            name="vllmchat-recogniser-load",
            daemon=True,
        ).start()

    def cancel(self) -> None:
        """Cut the request under way short at its next segment."""
        self._transcriber.cancel()

    def close(self) -> None:
        """End the recogniser's process (a request under way is cut short)."""
        self._transcriber.cancel()
        locked = self._lock.acquire(timeout=10)
        try:
            self._transcriber.close()
        finally:
            if locked:
                self._lock.release()
