"""Speech to text in a child process, so that no caller's thread holds the model.

``Transcriber`` spawns the recogniser (``transcriber_process``) on first use and
keeps it, with its model loaded, for the next request. A transcription is a
generator of typed events (``events``): progress in seconds of audio, each segment
as it is recognised, then one end (``TranscriptionDone``) or one failure
(``TranscriptionFailed``, one line). ``cancel`` stops a long file at its next
segment. A file that is missing, empty or not audio is a failure, not an exception.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType

from vllmchat.core.voice.events import (
    TranscriptionDone,
    TranscriptionEvent,
    TranscriptionFailed,
)
from vllmchat.core.voice.models import VoiceModelMissing, whisper_model_dir
from vllmchat.core.voice.transcriber_process import AudioRequest, serve

# Greedy decoding: within the real-time budget on two cores, as accurate on clear speech.
DEFAULT_BEAM = 1


@dataclass(frozen=True)
class PcmAudio:
    """Recorded audio: 16-bit little-endian PCM, channels interleaved."""

    pcm: bytes
    sample_rate: int
    channels: int = 1


class Transcriber:
    """faster-whisper (``base``, int8) in its own process, loaded once."""

    def __init__(
        self, model_dir: Path | None = None, *, threads: int = 2, model_name: str = ""
    ) -> None:
        """``model_dir``: the Whisper model's folder, else the installed model
        ``model_name`` ("": ``base``), found when the process starts."""
        self._model_dir = model_dir
        self.model_name = model_name
        self._threads = threads
        self._context = multiprocessing.get_context("spawn")
        self._cancel = self._context.Event()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    def transcribe_file(
        self, path: Path, *, language: str | None = None, beam_size: int = DEFAULT_BEAM
    ) -> Iterator[TranscriptionEvent]:
        """The events of transcribing the audio file at ``path``."""
        problem = _file_problem(path)
        if problem:
            yield TranscriptionFailed(problem)
            return
        request = AudioRequest(str(path), None, 0, 0, language, beam_size)
        yield from self._run(request)

    def transcribe_pcm(
        self, audio: PcmAudio, *, language: str | None = None, beam_size: int = DEFAULT_BEAM
    ) -> Iterator[TranscriptionEvent]:
        """The events of transcribing recorded PCM (any rate, mono or stereo)."""
        if audio.sample_rate <= 0 or audio.channels <= 0:
            yield TranscriptionFailed("the recording has no sample rate or channels")
            return
        request = AudioRequest(
            None, audio.pcm, audio.sample_rate, audio.channels, language, beam_size
        )
        yield from self._run(request)

    def cancel(self) -> None:
        """Stop the transcription under way at its next segment (what was heard is kept)."""
        self._cancel.set()

    def close(self) -> None:
        """End the child process (it is started again by the next transcription)."""
        conn, process = self._conn, self._process
        self._conn = self._process = None
        if conn is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send(None)
            conn.close()
        if process is not None:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()

    def __enter__(self) -> Transcriber:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, request: AudioRequest | None) -> Iterator[TranscriptionEvent]:
        try:
            conn = self._started()
        except VoiceModelMissing as exc:
            yield TranscriptionFailed(str(exc))
            return
        self._cancel.clear()
        while True:
            try:
                if request is not None:
                    conn.send(request)
                    request = None
                event: TranscriptionEvent = conn.recv()
            except (EOFError, OSError):
                why = self._why_it_ended()
                self.close()
                yield TranscriptionFailed(f"the speech recogniser stopped ({why})")
                return
            yield event
            if isinstance(event, TranscriptionDone | TranscriptionFailed):
                return

    def _why_it_ended(self) -> str:
        """How the recogniser's process ended (its pipe closes a moment before it is
        reaped, so it is waited for briefly)."""
        if self._process is None:
            return "its process is gone"
        self._process.join(timeout=2)
        code = self._process.exitcode
        if code is None:
            return "its pipe closed"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def _started(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        self.close()
        model_dir = self._model_dir or whisper_model_dir(self.model_name)
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=serve,
            args=(child, self._cancel, str(model_dir), self._threads),
            name="vllmchat-transcriber",
            daemon=True,
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        return parent


def transcript(events: Iterator[TranscriptionEvent]) -> TranscriptionDone | TranscriptionFailed:
    """The end of a transcription's events (its progress and segments passed over)."""
    for event in events:
        if isinstance(event, TranscriptionDone | TranscriptionFailed):
            return event
    return TranscriptionFailed("the transcription ended without a result")


def _file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be transcribed before it is even read, or None."""
    if not path.exists():
        return f"{path}: no such file"
    if path.is_dir():
        return f"{path}: a folder, not an audio file"
    if path.stat().st_size == 0:
        return f"{path}: the file is empty (0 bytes), there is no audio in it"
    return None
