"""A listening session: microphone audio in, what was said out, with partial text meanwhile.

The front end's recorder feeds 16 kHz mono PCM from its own thread; ``events`` runs on
a worker thread. While speech goes on, the audio so far is transcribed about once a
second (in the background, never two requests at once) for ``PartialTranscript``.
Hands-free, the turn ends after ``END_SILENCE_S`` of silence after speech (or after
``NO_SPEECH_S`` with none); push-to-talk, at ``finish``. Every byte fed is kept
(``audio``), so a failed transcription loses nothing.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from vllmchat.core.app.voice.events import (
    Heard,
    ListenEvent,
    ListenFailed,
    PartialTranscript,
    SpeechEnded,
)
from vllmchat.core.app.voice.recogniser import Recogniser
from vllmchat.core.app.voice.vad import FRAME, SAMPLE_RATE, EnergyVad
from vllmchat.core.voice.events import TranscriptionDone, TranscriptionFailed
from vllmchat.core.voice.transcriber import PcmAudio

END_SILENCE_S = 0.7  # hands-free: this much silence after speech ends the turn
NO_SPEECH_S = 10.0  # hands-free: nothing said for this long ends it too (nothing heard)
# Audio between partial transcriptions. Whisper's encoder reads 30 s windows, so a
# request costs about the same for 1 s of audio as for 9 s (about a second on two cores).
PARTIAL_EVERY_S = 1.0
# A pause this long after speech asks for a transcript at once: if the speaker is done,
# it is the final one, ready before the turn's end is certain.
_PAUSE_S = 0.15
_MIN_PARTIAL_SPEECH_S = 0.3  # speech heard before the first partial is worth asking for
# Speech a partial must cover before its detected language is kept for the session's later
# requests: detection costs about 0.4 s a request, the final one included.
_LANGUAGE_AFTER_S = 1.0


@dataclass(frozen=True)
class _Partial:
    """A partial transcription's result, with the audio it covered (in samples)."""

    result: TranscriptionDone | TranscriptionFailed | None
    covered: int


_FED, _FINISH, _CANCEL = "fed", "finish", "cancel"
_Message = str | _Partial


class ListenSession:
    """One utterance: ``feed`` from any thread, ``events`` on one worker thread."""

    def __init__(self, recogniser: Recogniser, *, hands_free: bool, language: str | None) -> None:
        self.hands_free = hands_free
        self._recogniser = recogniser
        self._language = language  # None: detected, then kept once a partial is sure
        self._audio = bytearray()
        self._lock = threading.Lock()
        self._messages: queue.Queue[_Message] = queue.Queue()
        self._cancelled = threading.Event()
        self._closed = False  # finish or cancel came: later audio is not kept
        self._final = threading.Event()  # the final transcription is under way

    # -- the recorder's side (any thread) ---------------------------------------------------
    def feed(self, pcm16k_mono: bytes) -> None:
        """More of the recording (16-bit little-endian mono PCM at 16 kHz)."""
        with self._lock:
            if self._closed:
                return
            self._audio += pcm16k_mono
        self._messages.put(_FED)

    def finish(self) -> None:
        """The user is done speaking (push-to-talk released, Enter pressed)."""
        with self._lock:
            self._closed = True
        self._messages.put(_FINISH)

    def cancel(self) -> None:
        """Drop the utterance: ``events`` ends without a transcript."""
        with self._lock:
            self._closed = True
        self._cancelled.set()
        if self._final.is_set():
            self._recogniser.cancel()
        self._messages.put(_CANCEL)

    def audio(self) -> PcmAudio:
        """Everything recorded so far (kept after a failure, to retry or save)."""
        with self._lock:
            return PcmAudio(bytes(self._audio), SAMPLE_RATE)

    # -- the worker's side ------------------------------------------------------------------
    def events(self) -> Iterator[ListenEvent]:
        """Partial text while speech goes on, then ``SpeechEnded`` and ``Heard`` (or
        ``ListenFailed``); nothing once cancelled."""
        vad = EnergyVad()
        read = 0  # bytes of the recording given to the VAD
        partial: threading.Thread | None = None
        last: _Partial | None = None
        asked_at = 0  # samples heard when the last partial was asked for
        asked_speech = 0  # and the speech among them
        while True:
            message = self._messages.get()
            if self._cancelled.is_set():
                return
            if isinstance(message, _Partial):
                partial, last = None, message
                if self._sure(message, asked_speech):
                    assert isinstance(message.result, TranscriptionDone)
                    yield PartialTranscript(message.result.text)
                continue
            with self._lock:
                chunk = bytes(
                    self._audio[read : len(self._audio) - (len(self._audio) - read) % (2 * FRAME)]
                )
            read += len(chunk)
            ended = message == _FINISH
            for start in range(0, len(chunk), 2 * FRAME):
                vad.push(chunk[start : start + 2 * FRAME])
                if self.hands_free and self._silent_end(vad):
                    ended = True
                    break
            if ended:
                break
            due = vad.frames * FRAME - asked_at >= PARTIAL_EVERY_S * SAMPLE_RATE
            # a pause: what was said so far may be all, and its transcript the final one
            paused = vad.silence_s >= _PAUSE_S and asked_at < vad.last_voiced_end
            speech_s = vad.speech_samples / SAMPLE_RATE
            free = partial is None and not self._recogniser.busy()
            if free and (due or paused) and speech_s >= _MIN_PARTIAL_SPEECH_S:
                asked_at, asked_speech = vad.frames * FRAME, vad.speech_samples
                partial = self._ask_partial(read)
        with self._lock:
            self._closed = True
            heard_s = len(self._audio) / 2 / SAMPLE_RATE
        yield SpeechEnded(round(heard_s, 3))
        while partial is not None:  # the recogniser is busy with it: wait for its answer
            message = self._messages.get()
            if self._cancelled.is_set():
                return
            if isinstance(message, _Partial):
                partial, last = None, message
                self._sure(message, asked_speech)  # its language serves the final request
        outcome = self._heard(last, vad, heard_s)
        if not self._cancelled.is_set():
            yield outcome

    def _sure(self, partial: _Partial, speech_samples: int) -> bool:
        """Whether a partial heard words; its language is kept once it covered enough
        speech to be sure of it."""
        result = partial.result
        if not (isinstance(result, TranscriptionDone) and result.text and not result.cancelled):
            return False
        if self._language is None and speech_samples >= _LANGUAGE_AFTER_S * SAMPLE_RATE:
            self._language = result.language or None
        return True

    def _silent_end(self, vad: EnergyVad) -> bool:
        if vad.speech_started:
            return vad.silence_s >= END_SILENCE_S
        return vad.heard_s >= NO_SPEECH_S

    def _ask_partial(self, upto: int) -> threading.Thread:
        audio = PcmAudio(bytes(self._audio[:upto]), SAMPLE_RATE)

        def run() -> None:
            result: TranscriptionDone | TranscriptionFailed | None = None
            try:
                result = self._recogniser.heard(audio, language=self._language, wait=False)
            except Exception as exc:  # a partial is only a preview: the final one says why
                result = TranscriptionFailed(str(exc))
            finally:
                self._messages.put(_Partial(result, upto // 2))

        thread = threading.Thread(target=run, name="vllmchat-partial-transcript", daemon=True)
        thread.start()
        return thread

    def _heard(self, last: _Partial | None, vad: EnergyVad, heard_s: float) -> Heard | ListenFailed:
        """The final transcript: the last partial's when it covered everything said
        (and was not cut short), else the whole recording's."""
        result: TranscriptionDone | TranscriptionFailed | None = last.result if last else None
        covered = last is not None and last.covered >= vad.last_voiced_end and vad.speech_started
        if not (covered and isinstance(result, TranscriptionDone) and not result.cancelled):
            self._final.set()
            result = self._recogniser.heard(self.audio(), language=self._language)
        if self._cancelled.is_set() or result is None:
            return ListenFailed("the recording was cancelled")
        if isinstance(result, TranscriptionFailed):
            return ListenFailed(result.message)
        return Heard(result.text, result.language, round(heard_s, 3))
