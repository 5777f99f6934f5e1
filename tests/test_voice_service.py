"""The app layer's voice with its real parts: Whisper hears a Piper voice, a reply is spoken."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from vllmchat.core.app.voice import listening
from vllmchat.core.app.voice.events import (
    Heard,
    ListenFailed,
    PartialTranscript,
    SpeakFailed,
    SpeakingEnded,
    SpeechEnded,
    SpokenPiece,
)
from vllmchat.core.app.voice.listening import ListenSession
from vllmchat.core.app.voice.service import VoiceService
from vllmchat.core.app.voice.speaking import AHEAD_S
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.events import DoneEvent, TokenEvent
from vllmchat.core.voice import models
from vllmchat.core.voice.speech_text import speakable_sentences
from vllmchat.core.voice.transcriber import PcmAudio

SENTENCE = "Please turn off the lights in the kitchen before you leave."
CHUNK = 960  # 30 ms of 16 kHz 16-bit mono
RNG = np.random.default_rng(7)


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def _room(seconds: float) -> np.ndarray:
    """A quiet room's noise (about -60 dBFS)."""
    return RNG.normal(0, 30, int(16000 * seconds))


@pytest.fixture(scope="module")
def voice() -> Iterator[VoiceService]:
    service = VoiceService(lambda: AppSettings.of(voice_language="en"))
    list(service.transcribe_pcm(PcmAudio(bytes(3200), 16000)))  # the recogniser loaded
    yield service
    service.close()


@pytest.fixture(scope="module")
def spoken(voice: VoiceService) -> np.ndarray:
    """SENTENCE in the Piper voice, at 16 kHz."""
    pcm = b"".join(p.pcm for p in voice.speak_text(SENTENCE) if isinstance(p, SpokenPiece))
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32)
    count = int(len(samples) * 16000 / 22050)
    return np.interp(np.linspace(0, len(samples) - 1, count), np.arange(len(samples)), samples)


def _pcm(*parts: np.ndarray) -> bytes:
    return np.clip(np.concatenate(parts), -32768, 32767).astype("<i2").tobytes()


def _collect(session: ListenSession) -> tuple[list, threading.Thread]:
    events: list = []
    worker = threading.Thread(target=lambda: events.extend(session.events()), daemon=True)
    worker.start()
    return events, worker


def test_hands_free_gives_partial_text_and_ends_by_itself_at_silence(
    voice: VoiceService, spoken: np.ndarray
) -> None:
    pcm = _pcm(_room(0.5), spoken, _room(2.0))
    session = voice.listen(hands_free=True)
    events, worker = _collect(session)
    started = time.perf_counter()
    for at in range(0, len(pcm), CHUNK):  # as fast as a microphone
        session.feed(pcm[at : at + CHUNK])
        time.sleep(max(0.0, started + (at + CHUNK) / 32000 - time.perf_counter()))
    worker.join(timeout=30)  # never finished: the silence ended it
    assert not worker.is_alive()
    partials = [e for e in events if isinstance(e, PartialTranscript)]
    assert partials and all(e.text for e in partials)
    ended = [e for e in events if isinstance(e, SpeechEnded)]
    assert len(ended) == 1 and ended[0].audio_s < len(pcm) / 32000 - 0.5
    heard = events[-1]
    assert isinstance(heard, Heard), events
    assert _words(heard.text) == _words(SENTENCE) and heard.language == "en"
    recorded = session.audio().pcm  # kept up to the end of the turn
    assert len(recorded) / 32000 == pytest.approx(ended[0].audio_s, abs=0.01)
    assert recorded == pcm[: len(recorded)]


def test_push_to_talk_ends_at_finish_and_keeps_the_trailing_silence(
    voice: VoiceService, spoken: np.ndarray
) -> None:
    pcm = _pcm(_room(0.3), spoken, _room(1.5))
    session = voice.listen(hands_free=False)
    session.feed(pcm)
    events, worker = _collect(session)
    time.sleep(0.3)
    assert not any(isinstance(e, SpeechEnded) for e in events)  # 1.5 s of silence: not the end
    session.finish()
    worker.join(timeout=30)
    ended = [e for e in events if isinstance(e, SpeechEnded)]
    assert len(ended) == 1 and ended[0].audio_s == pytest.approx(len(pcm) / 32000, abs=0.01)
    assert isinstance(events[-1], Heard) and _words(events[-1].text) == _words(SENTENCE)


def test_silence_and_noise_are_heard_as_nothing(voice: VoiceService) -> None:
    session = voice.listen(hands_free=False)
    session.feed(_pcm(_room(1.0), RNG.normal(0, 600, 16000), _room(1.0)))
    session.finish()
    events = list(session.events())
    assert not any(isinstance(e, PartialTranscript) for e in events)
    assert isinstance(events[-1], Heard) and events[-1].text == ""


def test_a_cancelled_recording_is_not_transcribed(voice: VoiceService, spoken: np.ndarray) -> None:
    session = voice.listen(hands_free=True)
    session.feed(_pcm(_room(0.3), spoken))
    session.cancel()
    session.feed(_pcm(_room(1.0)))  # after the cancel: dropped
    events = list(session.events())
    assert not any(isinstance(e, Heard | ListenFailed | SpeechEnded) for e in events)


def test_a_recogniser_that_dies_is_one_line_and_the_next_listen_works(
    voice: VoiceService, spoken: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listening, "PARTIAL_EVERY_S", 1e9)  # the final request alone
    monkeypatch.setattr(listening, "_PAUSE_S", 1e9)
    pcm = _pcm(_room(0.3), spoken, spoken, spoken, _room(0.5))
    session = voice.listen(hands_free=False)
    session.feed(pcm)
    session.finish()
    events, worker = _collect(session)
    while not session._final.is_set() and worker.is_alive():
        time.sleep(0.01)
    time.sleep(0.3)  # the final transcription is under way
    process = voice._recogniser._transcriber._process
    assert process is not None and process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    worker.join(timeout=30)
    assert isinstance(events[-1], ListenFailed) and "\n" not in events[-1].message
    assert "killed by signal 9" in events[-1].message  # how it ended, not "exit code None"
    assert len(session.audio().pcm) == len(pcm)  # the recording is there to retry
    again = voice.listen(hands_free=False)
    again.feed(_pcm(_room(0.3), spoken, _room(0.3)))
    again.finish()
    heard = list(again.events())[-1]
    assert isinstance(heard, Heard) and _words(heard.text) == _words(SENTENCE)


def test_a_reply_is_spoken_sentence_by_sentence_while_it_streams(make_demo_app) -> None:
    app, _ = make_demo_app(n_ctx=2048, max_tokens=24)
    events = list(app.voice.speaking(app.send("Tell me about the sea.")))
    done = next(e for e in events if isinstance(e, DoneEvent))
    pieces = [e for e in events if isinstance(e, SpokenPiece)]
    assert pieces and all(p.pcm and p.sample_rate == 22050 for p in pieces)
    said = _words(" ".join(p.text for p in pieces))
    assert said == _words(" ".join(speakable_sentences(done.text)))
    assert events[-1] == SpeakingEnded(stopped=False)


def test_stop_speaking_ends_the_reply_within_a_clause(voice: VoiceService) -> None:
    reply = " ".join(f"This is sentence number {n} of a long reply." for n in range(1, 9))
    turn = [TokenEvent(word + " ", 0) for word in reply.split()] + [DoneEvent(reply, "eos")]
    spoken, stopped_at = [], None
    for event in voice.speaking(iter(turn)):
        if isinstance(event, SpokenPiece):
            spoken.append(event)
            if stopped_at is None:
                voice.stop_speaking()
                stopped_at = time.perf_counter()
        elif isinstance(event, SpeakingEnded):
            assert event.stopped and stopped_at is not None
            assert time.perf_counter() - stopped_at < 0.5  # ended at once
    assert 1 <= len(spoken) <= 2


def test_the_windows_barge_in_leaves_an_api_clients_speech_alone(voice: VoiceService) -> None:
    text = "The first sentence for a client. The second one follows it. And a third."
    pieces = []
    for piece in voice.speak_text(text, barge_in=False):
        pieces.append(piece)
        voice.stop_speaking()  # the window's user presses the mic meanwhile
    assert all(isinstance(p, SpokenPiece) for p in pieces)
    assert "third" in pieces[-1].text


def test_a_voice_that_cannot_load_is_one_failure_and_the_turn_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> list[models.PiperVoice]:
        raise models.VoiceModelMissing("The Piper voice is not installed")

    monkeypatch.setattr(models, "piper_voice", missing)
    monkeypatch.setattr(models, "installed_voices", missing, raising=False)
    service = VoiceService(AppSettings)
    turn = [TokenEvent("Hello there. ", 0), TokenEvent("How are you?", 0), DoneEvent("", "eos")]
    events = list(service.speaking(iter(turn)))
    voiced = (SpeakFailed, SpeakingEnded, SpokenPiece)
    assert [e for e in events if not isinstance(e, voiced)] == turn  # all passed through
    failures = [e for e in events if isinstance(e, SpeakFailed)]
    assert len(failures) == 1 and "not installed" in failures[0].message
    assert events[-1] == SpeakingEnded(stopped=False)
    assert not service.voices() and not service.available().can_speak
    service.close()


def test_a_long_sentence_is_spoken_clause_by_clause(voice: VoiceService) -> None:
    sentence = (
        "When the train finally reached the station after a long delay, the passengers "
        "gathered their bags, and most of them walked quickly towards the exit."
    )
    pieces = list(voice.speak_text(sentence, speed=1.5))
    assert len(pieces) >= 2 and all(isinstance(p, SpokenPiece) and p.pcm for p in pieces)
    assert _words(" ".join(p.text for p in pieces)) == _words(sentence)


def test_a_stream_fed_from_another_thread_is_made_no_faster_than_it_is_heard(
    voice: VoiceService,
) -> None:
    """The first sentence at once; each later one only once the audio made runs less than
    AHEAD_S ahead of the clock, so synthesis stays behind the listener."""
    reply = "The sea is wide. It is deep and blue. Fish swim in it. Boats sail over it. "
    session = voice.speak_stream()
    fed = threading.Event()

    def streaming() -> None:
        for word in reply.split(" "):
            session.feed(word + " ")
        session.finish()
        fed.set()

    started = time.perf_counter()
    threading.Thread(target=streaming, daemon=True).start()
    arrivals: list[tuple[float, SpokenPiece]] = []
    events = []
    for event in session.events():
        events.append(event)
        if isinstance(event, SpokenPiece):
            arrivals.append((time.perf_counter(), event))
    assert fed.is_set() and events[-1] == SpeakingEnded(stopped=False)
    assert _words(" ".join(p.text for _, p in arrivals)) == _words(reply)
    first_at = arrivals[0][0]
    assert first_at - started < 3.0  # the first sentence is not held back
    made = 0.0
    for (at, _piece), (_at, before) in zip(arrivals[1:], arrivals, strict=False):
        made += before.duration_s
        assert made - (at - first_at) < AHEAD_S + 0.05  # begun only once the listener needed it
    total = sum(p.duration_s for _, p in arrivals)
    last = arrivals[-1][1].duration_s
    assert arrivals[-1][0] - first_at > total - last - AHEAD_S - 0.05  # paced, not all at once


def test_a_stream_stopped_while_it_waits_for_the_listener_ends_at_once(
    voice: VoiceService,
) -> None:
    session = voice.speak_stream()
    session.feed(
        "The first sentence is a long one, so that its audio runs well ahead of the clock. "
        "The second waits its turn. And a third one."
    )
    session.finish()
    events = session.events()
    first = next(events)
    assert isinstance(first, SpokenPiece)
    time.sleep(0.5)  # the next sentence is held back: the audio made is still ahead
    stopped_at = time.perf_counter()
    voice.stop_speaking()
    rest = list(events)
    assert rest[-1] == SpeakingEnded(stopped=True)
    assert time.perf_counter() - stopped_at < 0.5
    later = [e.text for e in rest if isinstance(e, SpokenPiece)]
    assert not any("second" in text or "third" in text for text in later)  # never begun


def test_the_first_sentences_later_clauses_wait_for_the_listener_too(
    voice: VoiceService,
) -> None:
    """Only the first clause is made at once: the rest of a long first sentence is made
    while the listener hears it, not while the reply is still being decoded."""
    session = voice.speak_stream()
    session.feed(
        "When the train reached the old station after a long delay, "
        "the passengers gathered their bags and coats, "
        "and walked towards the exit in the rain."
    )
    session.finish()
    arrivals = [(time.perf_counter(), e) for e in session.events() if isinstance(e, SpokenPiece)]
    assert len(arrivals) >= 3
    first_at, made = arrivals[0][0], 0.0
    for (at, _piece), (_at, before) in zip(arrivals[1:], arrivals, strict=False):
        made += before.duration_s
        assert made - (at - first_at) < AHEAD_S + 0.05


def test_the_speech_model_picked_in_the_settings_hears_the_next_request(
    spoken: np.ndarray, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = models.whisper_model_dir()
    monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    copy = models.voice_models_dir() / "whisper-copy"  # base again, under another name
    copy.mkdir()
    for file in base.iterdir():
        os.link(file, copy / file.name)
    picked = {"voice_recogniser": "whisper-copy", "voice_language": "en"}
    service = VoiceService(lambda: AppSettings.of(**picked))
    try:
        audio = PcmAudio(_pcm(_room(0.3), spoken, _room(0.3)), 16000)
        heard = list(service.transcribe_pcm(audio))[-1]
        assert _words(heard.text) == _words(SENTENCE)
        first = service._recogniser._transcriber
        assert first.model_name == "whisper-copy"
        picked["voice_recogniser"] = "whisper-small"  # not installed here
        failed = list(service.transcribe_pcm(audio))[-1]
        assert "whisper-small (486 MB) is not installed" in failed.message
        assert first._process is None  # the old model's process ended
        readiness = service.available()
        assert not readiness.can_listen and "whisper-small" in readiness.missing[0]
        assert "whisper-copy" not in readiness.recognisers  # only the catalogue's are listed
        picked["voice_recogniser"] = "whisper-copy"
        again = list(service.transcribe_pcm(audio))[-1]
        assert _words(again.text) == _words(SENTENCE)  # the chat goes on
    finally:
        service.close()
