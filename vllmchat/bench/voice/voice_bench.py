"""``vllmchat bench voice``: the voice on this CPU, its two halves checked against each other.

- ``stt_rtf``: seconds to transcribe over seconds of audio, on one clip of the thirty
  sentences spoken by the voice (about a minute and a half), the model already loaded;
- ``stt_latency_s_median``: a finished sentence (about 2 to 3 s of speech) to its
  transcript, the recogniser alone; ``listen_ptt_s`` / ``listen_hands_free_s``: the same
  through the app's ``ListenSession`` fed at a microphone's pace (``live``);
- ``wer_tts``: word error rate of thirty Harvard sentences (phonetically balanced, out of
  any context: hard) spoken by the Piper voice, then recognised one by one;
  ``wer_tts_chat``: the same for thirty things people say to a chat model;
  ``wer_espeak``, ``wer_espeak_chat``: the same spoken by espeak-ng (when installed);
  ``wer_round_trip``: all four together; ``*_beam5``: with beam search instead of the
  app's greedy decoding; ``worst_*``: the sentences with the most errors. Both texts are
  normalised as Whisper's scoring does (``scoring``);
- ``stt_language_detection_s``: what detecting the language adds to a sentence's wait;
- ``tts_rtf``: seconds to synthesize over seconds of speech; ``tts_first_audio_s_median``:
  one sentence's synthesis; ``first_audio_s``, ``barge_in_s``, ``decode_ratio_speaking``:
  a real streamed turn spoken through ``VoiceService.speaking`` (``live``);
- ``hallucinated_words_silence`` / ``_noise``: words recognised in 30 s of silence and of
  white noise (Whisper's "Thank you." habit): 0 is right;
- ``stt_load_s``: the recogniser's process started and its model loaded; ``tts_load_s``;
  ``stt_peak_rss_mb``: the recogniser process's peak memory; ``tts_rss_mb``: what loading
  the voice and speaking added to this process.

``figures`` lists each figure of the table with its target and whether it was met.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

import psutil

from vllmchat.bench.voice import recognition as rec
from vllmchat.bench.voice.scoring import Scored, pooled, word_errors
from vllmchat.bench.voice.sentences import CHAT_SENTENCES, HARVARD_SENTENCES
from vllmchat.bench.voice.targets import figures
from vllmchat.core.voice.catalogue import WHISPER_NAME
from vllmchat.core.voice.events import TranscriptionDone
from vllmchat.core.voice.speaker import Speaker
from vllmchat.core.voice.transcriber import DEFAULT_BEAM, PcmAudio, Transcriber, transcript

BEAM_SEARCH = 5


def run(*, quick: bool = False, threads: int = 2, recogniser: str = "") -> dict[str, Any]:
    """The figures on this machine; ``recogniser``: the Whisper model ("": base)."""
    sentences: tuple[str, ...] = HARVARD_SENTENCES[:10] if quick else HARVARD_SENTENCES
    chat: tuple[str, ...] = CHAT_SENTENCES[:10] if quick else CHAT_SENTENCES
    result: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "load_average_at_start": round(os.getloadavg()[0], 2),
        "sentences": len(sentences),
        "stt_model": f"{recogniser or WHISPER_NAME} (CTranslate2), int8, beam {DEFAULT_BEAM}, "
        "VAD filter on",
        "tts_voice": "piper en_US-joe-medium (sherpa-onnx, eSpeak NG phonemes)",
    }
    rss_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    speaker = Speaker(threads=threads)
    result["tts_load_s"] = round(time.perf_counter() - started, 2)
    spoken, synth_times = rec.speak_all(speaker, sentences)
    audio_s = sum(s.duration_s for s in spoken)
    result["tts_rtf"] = round(sum(synth_times) / audio_s, 3)
    result["tts_first_audio_s_median"] = round(statistics.median(synth_times), 3)
    result["tts_rss_mb"] = round((psutil.Process().memory_info().rss - rss_before) / 2**20)
    chat_spoken, _ = rec.speak_all(speaker, chat)
    sets: dict[str, tuple[tuple[str, ...], list[PcmAudio]]] = {
        "tts": (sentences, rec.as_audio(spoken)),
        "tts_chat": (chat, rec.as_audio(chat_spoken)),
    }
    espeak, espeak_chat = rec.espeak_all(sentences), rec.espeak_all(chat)
    if espeak is not None and espeak_chat is not None:
        sets |= {"espeak": (sentences, espeak), "espeak_chat": (chat, espeak_chat)}
    with Transcriber(threads=threads, model_name=recogniser) as transcriber:
        started = time.perf_counter()
        transcript(transcriber.transcribe_pcm(PcmAudio(b"\0\0" * 16000, 16000), language="en"))
        result["stt_load_s"] = round(time.perf_counter() - started, 2)
        result.update(_word_error_rates(transcriber, sets, beam=DEFAULT_BEAM, suffix=""))
        if not quick:
            result.update(_word_error_rates(transcriber, sets, beam=BEAM_SEARCH, suffix="_beam5"))
        result["stt_language_detection_s"] = rec.detection_cost(transcriber, spoken[:5])
        clip = rec.joined(spoken)
        started = time.perf_counter()
        done = transcript(transcriber.transcribe_pcm(clip, language="en"))
        took = time.perf_counter() - started
        result["stt_clip_s"] = round(rec.duration(clip), 1)
        result["stt_rtf"] = round(took / rec.duration(clip), 3)
        assert isinstance(done, TranscriptionDone), done
        words = " ".join(sentences)
        result["wer_tts_clip"] = round(word_errors(words, done.text) / len(words.split()), 4)
        result.update(rec.invented_words(transcriber))
        result["stt_peak_rss_mb"] = _peak_rss_mb(transcriber)
    rounds = 1 if quick else 7
    result.update(_app_figures(speaker, threads=threads, rounds=rounds, recogniser=recogniser))
    result["load_average_at_end"] = round(os.getloadavg()[0], 2)
    result["figures"] = figures(result)
    return result


def _word_error_rates(
    transcriber: Transcriber,
    sets: dict[str, tuple[tuple[str, ...], list[PcmAudio]]],
    *,
    beam: int,
    suffix: str,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    scores: list[Scored] = []
    for name, (said, audio) in sets.items():
        heard = rec.recognised(transcriber, said, audio, beam=beam)
        scores.append(heard.score)
        out[f"wer_{name}{suffix}"] = heard.score.wer
        out[f"worst_{name}{suffix}"] = [
            {"errors": n, "said": s, "heard": h} for n, s, h in heard.score.worst
        ]
        if name == "tts" and not suffix:
            out["stt_latency_s_median"] = round(statistics.median(heard.latencies), 3)
    out[f"wer_round_trip{suffix}"] = pooled(scores)
    return out


def _app_figures(speaker: Speaker, *, threads: int, rounds: int, recogniser: str) -> dict[str, Any]:
    """The figures taken through the app's ``VoiceService`` (where it is part of the app)."""
    from vllmchat.bench.voice import live

    out = live.sink_stop_figure(speaker)
    try:
        from vllmchat.core.app.voice.service import VoiceService
        from vllmchat.core.app_settings import AppSettings
    except ImportError as exc:
        note = f"the app's voice service is not here ({exc})"
        return out | {f"{key}_note": note for key in _SERVICE_FIGURES}
    service = VoiceService(lambda: AppSettings.of(voice_recogniser=recogniser), threads=threads)
    try:
        out |= live.listening_figures(service, speaker)
        out |= live.speaking_figures(service, threads=threads, rounds=rounds)
    finally:
        service.close()
    return out


_SERVICE_FIGURES = (
    "listen_ptt_s",
    "listen_hands_free_s",
    "first_audio_s",
    "barge_in_s",
    "decode_ratio_speaking",
    "decode_ratio_speaking_long",
)


def _peak_rss_mb(transcriber: Transcriber) -> int | None:
    process = transcriber._process  # the bench looks at the child it measures
    if process is None or process.pid is None:
        return None
    status = Path(f"/proc/{process.pid}/status")
    if status.exists():
        match = re.search(r"VmHWM:\s+(\d+) kB", status.read_text())
        if match:
            return int(match.group(1)) // 1024
    return int(psutil.Process(process.pid).memory_info().rss // 2**20)
