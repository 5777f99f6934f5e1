"""The voice as the app uses it: a streamed turn spoken, barge-in, and listening sessions.

- ``first_audio_s``: a real turn on the demo model through ``VoiceService.speaking``:
  from the moment the streamed reply completes its first sentence to its first
  ``SpokenPiece``;
- ``barge_in_s``: ``stop_speaking()`` while a reply is being spoken until nothing more is
  handed out to play (the call's own time; ``barge_in_pieces_after_stop`` must be 0);
  ``barge_in_synthesis_end_s``: until the synthesis under way has ended;
  ``barge_in_speaking_ended_s``: until ``SpeakingEnded``, which comes after the turn's
  last event; ``sink_stop_s``: the audio output's own stop (where there is one);
- ``decode_tok_s_plain`` / ``_speaking``: the same greedy turn without and with
  ``speaking()`` around it, in turns; ``decode_ratio_speaking`` the fastest spoken turn's
  speed over the fastest plain one's (this machine's own noise only slows a turn, by up
  to 20%: the fastest of each is the least disturbed), ``_paired`` the median of each
  pair's ratio; ``decode_ratio_speaking_long``: the same for a reply of
  ``LONG_TURN_TOKENS``, which decodes while its first seconds are spoken (the speech
  stops with the decode);
- ``listen_ptt_s`` / ``listen_hands_free_s``: a sentence fed to a ``ListenSession`` at the
  pace of a microphone, from the end of speech (its last voiced frame, before the voice's
  quiet tail) to ``Heard`` (push-to-talk: released at the recording's end; hands-free:
  the silence that follows ends it).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from vllmchat.core.app.events import AppEvent
from vllmchat.core.engine.events import StatsEvent, TokenEvent
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.voice.speaker import Speaker
from vllmchat.core.voice.speech_text import SpeechSplitter
from vllmchat.core.voice.transcriber import PcmAudio
from vllmchat.core.voice.transcriber_process import pcm_to_whisper

TURN_PROMPT = "Tell me about the sea. Write five short sentences."
TURN_TOKENS = 160
LONG_TURN_TOKENS = 512
CHUNK_S = 0.1  # the microphone's pace: a chunk of this much audio at a time
LISTEN_LINES = (
    "What is the capital of France?",
    "Help me plan a weekend trip to the mountains.",
    "How can I sleep better at night?",
)


def speaking_figures(service: Any, *, threads: int, rounds: int) -> dict[str, Any]:
    """First audio, barge-in and decode speed with and without speech, on the demo model."""
    from vllmchat.core.app.engines import open_local
    from vllmchat.core.demo_model import demo_model_path

    model = demo_model_path(install=False)
    settings = LoadSettings(model_path=str(model), n_ctx=2048, n_threads=threads)
    client = open_local()
    service._slot.cores = client.lend_cores  # as the app's voice borrows from its engine
    result: dict[str, Any] = {
        "speaking_model": model.name,
        "speaking_turn_tokens": TURN_TOKENS,
        "speaking_long_turn_tokens": LONG_TURN_TOKENS,
        "speaking_rounds": rounds,
    }
    try:
        client.load(settings)
        _plain_turn(client)  # warm
        for _ in service.speak_text("Warm up."):  # the voice loaded, as after a first reply
            pass
        plain, spoken, first_audio, barge = [], [], [], []
        long_plain, long_spoken = [], []
        for _ in range(rounds):
            plain.append(_plain_turn(client))
            tok_s, first = _spoken_turn(service, client)
            spoken.append(tok_s)
            if first is not None:
                first_audio.append(first)
            long_plain.append(_plain_turn(client, LONG_TURN_TOKENS))
            long_spoken.append(_spoken_turn(service, client, LONG_TURN_TOKENS)[0])
            barge.append(_barge_in(service, client))
    finally:
        client.close()
    result["decode_tok_s_plain"] = round(max(plain), 2)
    result["decode_tok_s_speaking"] = round(max(spoken), 2)
    result |= _ratios("decode_ratio_speaking", plain, spoken)
    result |= _ratios("decode_ratio_speaking_long", long_plain, long_spoken)
    result["first_audio_s"] = round(statistics.median(first_audio), 3) if first_audio else None
    # Silence, as far as the app layer goes: the stop returned and no piece came after it.
    result["barge_in_s"] = round(max(b.silence_s for b in barge), 4)
    result["barge_in_pieces_after_stop"] = sum(b.late_pieces for b in barge)
    ends = [b.synthesis_end_s for b in barge if b.synthesis_end_s is not None]
    result["barge_in_synthesis_end_s"] = round(max(ends), 3) if ends else None
    ended = [b.speaking_ended_s for b in barge if b.speaking_ended_s is not None]
    result["barge_in_speaking_ended_s"] = round(max(ended), 3) if ended else None
    return result


def _ratios(key: str, plain: list[float], spoken: list[float]) -> dict[str, Any]:
    """Spoken over plain decode speed: the fastest of each, and each pair's (median, range)."""
    pairs = [s / p for s, p in zip(spoken, plain, strict=True)]
    return {
        key: round(max(spoken) / max(plain), 3),
        f"{key}_paired": round(statistics.median(pairs), 3),
        f"{key}_paired_range": [round(min(pairs), 3), round(max(pairs), 3)],
    }


def _sampling(tokens: int) -> SamplingSettings:
    return SamplingSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=tokens, ignore_eos=True)


def _turn(client: EngineClient, tokens: int = TURN_TOKENS) -> Iterator[AppEvent]:
    return client.chat([{"role": "user", "content": TURN_PROMPT}], _sampling(tokens))


def _plain_turn(client: EngineClient, tokens: int = TURN_TOKENS) -> float:
    for event in _turn(client, tokens):
        if isinstance(event, StatsEvent):
            return float(event.stats.decode_tok_s)
    raise RuntimeError("the turn gave no stats")


def _spoken_turn(
    service: Any, client: EngineClient, tokens: int = TURN_TOKENS
) -> tuple[float, float | None]:
    """Decode tokens/s of a turn spoken as it streams, and its first sentence's wait (the
    speech stops once both are known: the rest would be heard after the decode)."""
    from vllmchat.core.app.voice.events import SpeakFailed, SpokenPiece

    splitter = SpeechSplitter()
    sentence_at = first_at = None
    tok_s = 0.0
    for event in service.speaking(_turn(client, tokens)):
        if isinstance(event, TokenEvent) and sentence_at is None and splitter.feed(event.text):
            sentence_at = time.perf_counter()
        elif isinstance(event, StatsEvent):
            tok_s = float(event.stats.decode_tok_s)
            if first_at is not None:
                service.stop_speaking()
        elif isinstance(event, SpokenPiece) and first_at is None:
            first_at = time.perf_counter()
            if tok_s:
                service.stop_speaking()
        elif isinstance(event, SpeakFailed):
            raise RuntimeError(f"the voice failed: {event.message}")
    if sentence_at is None or first_at is None:
        return tok_s, None
    return tok_s, first_at - sentence_at


@dataclass(frozen=True)
class _BargeIn:
    silence_s: float  # the stop's call, or the last piece handed out after it
    late_pieces: int
    synthesis_end_s: float | None
    speaking_ended_s: float | None


def _barge_in(service: Any, client: EngineClient) -> _BargeIn:
    """``stop_speaking()`` at the first piece: how long the call took, pieces still handed
    out after it (0 is right: nothing more to play), when the speaking thread ended (the
    synthesis under way stopped, the CPU free), and when ``SpeakingEnded`` came."""
    from vllmchat.core.app.voice.events import SpeakingEnded, SpokenPiece

    stopped_at = thread_end = None
    silence_s = 0.0
    late = 0
    for event in service.speaking(_turn(client)):
        now = time.perf_counter()
        if stopped_at is not None and thread_end is None and not _speaking_thread():
            thread_end = now - stopped_at
        if isinstance(event, SpokenPiece) and stopped_at is None:
            stopped_at = time.perf_counter()
            service.stop_speaking()
            silence_s = time.perf_counter() - stopped_at
        elif isinstance(event, SpokenPiece) and stopped_at is not None:
            late += 1
            silence_s = now - stopped_at
        elif isinstance(event, SpeakingEnded) and stopped_at is not None:
            return _BargeIn(silence_s, late, thread_end, now - stopped_at)
    return _BargeIn(silence_s, late, thread_end, None)


def _speaking_thread() -> bool:
    return any(t.name == "vllmchat-speaking" and t.is_alive() for t in threading.enumerate())


def sink_stop_figure(speaker: Speaker) -> dict[str, Any]:
    """The audio output's stop while it plays a sentence (no output device: None, said why)."""
    try:
        from vllmchat.audio.devices import output_devices
        from vllmchat.audio.player import Player
    except ImportError as exc:
        return {"sink_stop_s": None, "sink_stop_note": f"no audio player here ({exc})"}
    if not output_devices():
        return {"sink_stop_s": None, "sink_stop_note": "no audio output device on this machine"}
    from vllmchat.audio.qt_audio import deliver_audio

    player = Player()
    speech = speaker.speak("The sea was calm and the sky was clear all day long.")
    player.play(speech.pcm, speech.sample_rate)
    until = time.perf_counter() + 0.5
    while time.perf_counter() < until:
        deliver_audio()
        time.sleep(0.01)
    player.stop()
    return {"sink_stop_s": round(player.last_stop_s, 4), "sink_stop_note": "default output"}


def listening_figures(service: Any, speaker: Speaker) -> dict[str, Any]:
    """End of speech to ``Heard``: push-to-talk and hands-free, a few sentences each."""
    from vllmchat.core.app.voice.listening import END_SILENCE_S

    lines = [_mic_audio(speaker, line) for line in LISTEN_LINES]
    for _ in service.transcribe_pcm(PcmAudio(bytes(32000), 16000), language="en"):
        pass  # the recogniser started and its model loaded, as after a first utterance
    ptt = [_listen(service, pcm, hands_free=False) for pcm in lines]
    free = [_listen(service, pcm, hands_free=True) for pcm in lines]
    return {
        "listen_ptt_s": round(statistics.median(t for t, _ in ptt), 3),
        "listen_hands_free_s": round(statistics.median(t for t, _ in free), 3),
        "listen_hands_free_after_silence_s": round(statistics.median(t for _, t in free), 3),
        "listen_end_silence_s": END_SILENCE_S,
        "listen_heard": [text for _, text in ptt],
    }


def _mic_audio(speaker: Speaker, line: str) -> bytes:
    """``line`` spoken, as a microphone gives it: 16 kHz mono, a little silence before."""
    speech = speaker.speak(line)
    samples = pcm_to_whisper(speech.pcm, speech.sample_rate, 1)
    lead = np.zeros(4000, dtype=np.float32)
    return (np.concatenate([lead, samples]) * 32767).astype("<i2").tobytes()


def _trailing_quiet_s(pcm: bytes, frame: int = 480) -> float:
    """The quiet after the last voiced 30 ms frame (under 5% of the loudest frame's RMS):
    the voice's own tail, which is not speech."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    frames = samples[: len(samples) // frame * frame].reshape(-1, frame)
    rms = np.sqrt((frames**2).mean(axis=1))
    voiced = np.nonzero(rms > 0.05 * rms.max())[0]
    last = int(voiced[-1]) if voiced.size else len(frames) - 1
    return (len(samples) - (last + 1) * frame) / 16000


def _listen(service: Any, pcm: bytes, *, hands_free: bool) -> tuple[float, Any]:
    """(seconds from the end of speech, the last voiced frame fed, to Heard; seconds from
    SpeechEnded to Heard): for push-to-talk the second is the text heard. Push-to-talk is
    released at the recording's last sample, the voice's quiet tail included."""
    from vllmchat.core.app.voice.events import Heard, ListenFailed, SpeechEnded

    session = service.listen(hands_free=hands_free)
    spoken_end: list[float] = []
    chunk = int(CHUNK_S * 16000) * 2

    def microphone() -> None:
        started = time.perf_counter()
        for i, start in enumerate(range(0, len(pcm), chunk), 1):
            session.feed(pcm[start : start + chunk])
            time.sleep(max(0.0, started + i * CHUNK_S - time.perf_counter()))
        spoken_end.append(time.perf_counter())
        if not hands_free:
            session.finish()
            return
        silence = bytes(chunk)
        for _ in range(40):  # at most 4 s of silence; the session ends itself before
            if ended.is_set():
                return
            session.feed(silence)
            time.sleep(CHUNK_S)

    ended = threading.Event()
    feeder = threading.Thread(target=microphone, daemon=True)
    feeder.start()
    ended_at = None
    for event in session.events():
        if isinstance(event, SpeechEnded):
            ended_at = time.perf_counter()
            ended.set()
        elif isinstance(event, Heard | ListenFailed):
            heard_at = time.perf_counter()
            ended.set()
            feeder.join()
            if isinstance(event, ListenFailed):
                raise RuntimeError(f"listening failed: {event.message}")
            after = heard_at - (ended_at or heard_at) if hands_free else event.text
            return heard_at - (spoken_end[0] - _trailing_quiet_s(pcm)), after
    raise RuntimeError("the listening session ended without a transcript")
