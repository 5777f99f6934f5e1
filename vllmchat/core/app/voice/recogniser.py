"""The one speech recogniser of the app, asked one request at a time.

Each request is heard by the Whisper model the settings name now: when the user picks
another, the next request ends the old model's process and starts the new one's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from vllmchat.core.voice.events import TranscriptionDone, TranscriptionEvent, TranscriptionFailed
from vllmchat.core.voice.transcriber import PcmAudio, Transcriber, transcript


class Recogniser:
    """A ``Transcriber`` behind a lock: requests from several threads wait their turn."""

    def __init__(self, *, threads: int = 2, model: Callable[[], str] = lambda: "") -> None:
        """``model``: the name of the Whisper model to hear with ("": ``base``)."""
        self._threads = threads
        self._model = model
        self._transcriber = Transcriber(threads=threads, model_name=model())
        self._lock = threading.Lock()
        self._warmed = False

    def _current(self) -> Transcriber:
        """The transcriber of the model picked now (called with the lock held)."""
        name = self._model()
        if name != self._transcriber.model_name:
            self._transcriber.close()
            self._transcriber = Transcriber(threads=self._threads, model_name=name)
        return self._transcriber

    def file(self, path: Path, *, language: str | None) -> Iterator[TranscriptionEvent]:
        with self._lock:
            yield from self._current().transcribe_file(path, language=language)

    def pcm(self, audio: PcmAudio, *, language: str | None) -> Iterator[TranscriptionEvent]:
        with self._lock:
            yield from self._current().transcribe_pcm(audio, language=language)

    def heard(
        self, audio: PcmAudio, *, language: str | None, wait: bool = True
    ) -> TranscriptionDone | TranscriptionFailed | None:
        """The transcript of ``audio``; None when ``wait`` is False and another runs."""
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            return transcript(self._current().transcribe_pcm(audio, language=language))
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
