"""``vllmchat bench voice``: the voice on this CPU, its two halves checked against each other.

- ``stt_rtf``: seconds to transcribe over seconds of audio, on one clip of the thirty
  sentences spoken by the voice (about a minute and a half), the model already loaded;
- ``stt_latency_s_median``: a finished sentence (about 2 to 3 s of speech) to its
  transcript: the wait after the speaker stops, without partial results;
- ``wer_tts``: word error rate of thirty Harvard sentences (phonetically balanced, out of
  any context: hard) spoken by the Piper voice, then recognised one by one;
  ``wer_tts_chat``: the same for thirty things people say to a chat model;
  ``wer_espeak``, ``wer_espeak_chat``: the same spoken by espeak-ng (when installed);
- ``stt_language_detection_s``: what detecting the language adds to a sentence's wait;
- ``tts_rtf``: seconds to synthesize over seconds of speech; ``tts_first_audio_s_median``:
  one sentence's synthesis (the wait before a finished sentence is heard);
- ``hallucinated_words_silence`` / ``_noise``: words recognised in 30 s of silence and of
  white noise (Whisper's "Thank you." habit): 0 is right;
- ``stt_load_s``: the recogniser's process started and its model loaded; ``tts_load_s``;
  ``stt_peak_rss_mb``: the recogniser process's peak memory; ``tts_rss_mb``: what loading
  the voice and speaking added to this process.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from vllmchat.bench.voice.sentences import CHAT_SENTENCES, HARVARD_SENTENCES
from vllmchat.core.voice.events import TranscriptionDone
from vllmchat.core.voice.number_words import number_words
from vllmchat.core.voice.speaker import Speaker, Speech
from vllmchat.core.voice.transcriber import PcmAudio, Transcriber, transcript

_PAUSE_S = 0.4


def run(*, quick: bool = False, threads: int = 2) -> dict[str, Any]:
    sentences = HARVARD_SENTENCES[:10] if quick else HARVARD_SENTENCES
    chat = CHAT_SENTENCES[:10] if quick else CHAT_SENTENCES
    result: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "load_average_at_start": round(os.getloadavg()[0], 2),
        "sentences": len(sentences),
        "stt_model": "whisper base (CTranslate2), int8, greedy, VAD filter on",
        "tts_voice": "piper en_US-joe-medium (sherpa-onnx, eSpeak NG phonemes)",
    }
    rss_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    speaker = Speaker(threads=threads)
    result["tts_load_s"] = round(time.perf_counter() - started, 2)
    spoken, synth_times = _speak_all(speaker, sentences)
    audio_s = sum(s.duration_s for s in spoken)
    result["tts_rtf"] = round(sum(synth_times) / audio_s, 3)
    result["tts_first_audio_s_median"] = round(statistics.median(synth_times), 3)
    result["tts_rss_mb"] = round((psutil.Process().memory_info().rss - rss_before) / 2**20)
    with Transcriber(threads=threads) as transcriber:
        started = time.perf_counter()
        transcript(transcriber.transcribe_pcm(PcmAudio(b"\0\0" * 16000, 16000), language="en"))
        result["stt_load_s"] = round(time.perf_counter() - started, 2)
        result.update(_recognised(transcriber, sentences, spoken))
        chat_spoken, _ = _speak_all(speaker, chat)
        chat_heard = _recognised(transcriber, chat, chat_spoken)
        result["wer_tts_chat"] = chat_heard["wer_tts"]
        result["misheard_tts_chat"] = chat_heard["misheard_tts"]
        result["stt_language_detection_s"] = _detection_cost(transcriber, spoken[:5])
        clip = _joined(spoken)
        started = time.perf_counter()
        done = transcript(transcriber.transcribe_pcm(clip, language="en"))
        took = time.perf_counter() - started
        result["stt_clip_s"] = round(_duration(clip), 1)
        result["stt_rtf"] = round(took / _duration(clip), 3)
        assert isinstance(done, TranscriptionDone), done
        result["wer_tts_clip"] = round(_wer(" ".join(sentences), done.text), 4)
        result.update(_invented_words(transcriber))
        for name, said in (("wer_espeak", sentences), ("wer_espeak_chat", chat)):
            espeak = _espeak_wer(transcriber, said)
            if espeak is not None:
                result[name] = espeak
        result["stt_peak_rss_mb"] = _peak_rss_mb(transcriber)
    return result


def _speak_all(speaker: Speaker, sentences: tuple[str, ...]) -> tuple[list[Speech], list[float]]:
    spoken, times = [], []
    speaker.speak("Warm up.")
    for sentence in sentences:
        started = time.perf_counter()
        spoken.append(speaker.speak(sentence))
        times.append(time.perf_counter() - started)
    return spoken, times


def _recognised(
    transcriber: Transcriber, sentences: tuple[str, ...], spoken: list[Speech]
) -> dict[str, Any]:
    heard, latencies = [], []
    for speech in spoken:
        started = time.perf_counter()
        audio = PcmAudio(speech.pcm, speech.sample_rate)
        done = transcript(transcriber.transcribe_pcm(audio, language="en"))
        latencies.append(time.perf_counter() - started)
        heard.append(done.text if isinstance(done, TranscriptionDone) else "")
    errors = sum(_word_errors(said, got) for said, got in zip(sentences, heard, strict=True))
    words = sum(len(_words(s)) for s in sentences)
    misheard = [
        {"said": said, "heard": got}
        for said, got in zip(sentences, heard, strict=True)
        if _words(said) != _words(got)
    ]
    return {
        "wer_tts": round(errors / words, 4),
        "stt_latency_s_median": round(statistics.median(latencies), 3),
        "misheard_tts": misheard,
    }


def _detection_cost(transcriber: Transcriber, spoken: list[Speech]) -> float:
    """Median seconds that detecting the language adds to a sentence's transcription."""
    extra = []
    for speech in spoken:
        audio = PcmAudio(speech.pcm, speech.sample_rate)
        timed = []
        for language in ("en", None):
            started = time.perf_counter()
            transcript(transcriber.transcribe_pcm(audio, language=language))
            timed.append(time.perf_counter() - started)
        extra.append(timed[1] - timed[0])
    return round(statistics.median(extra), 3)


def _invented_words(transcriber: Transcriber) -> dict[str, int]:
    rng = np.random.default_rng(3)
    silence = np.zeros(16000 * 30, dtype="<i2")
    noise = rng.normal(0, 3000, 16000 * 30).clip(-32768, 32767).astype("<i2")
    counts = {}
    for name, audio in (("silence", silence), ("noise", noise)):
        done = transcript(transcriber.transcribe_pcm(PcmAudio(audio.tobytes(), 16000)))
        text = done.text if isinstance(done, TranscriptionDone) else ""
        counts[f"hallucinated_words_{name}"] = len(_words(text))
    return counts


def _espeak_wer(transcriber: Transcriber, sentences: tuple[str, ...]) -> float | None:
    """The sentences spoken by espeak-ng (a second, very different voice), recognised."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        return None
    errors = words = 0
    with tempfile.TemporaryDirectory() as folder:
        for i, sentence in enumerate(sentences):
            path = Path(folder) / f"{i}.wav"
            subprocess.run([binary, "-v", "en-us", "-w", str(path), sentence], check=True)
            done = transcript(transcriber.transcribe_file(path, language="en"))
            heard = done.text if isinstance(done, TranscriptionDone) else ""
            errors += _word_errors(sentence, heard)
            words += len(_words(sentence))
    return round(errors / words, 4)


def _joined(spoken: list[Speech]) -> PcmAudio:
    """The sentences one after another, at 16 kHz, with a short pause between them."""
    from vllmchat.core.voice.transcriber_process import SAMPLE_RATE, pcm_to_whisper

    pause = np.zeros(int(_PAUSE_S * SAMPLE_RATE), dtype=np.float32)
    parts = []
    for speech in spoken:
        parts += [pcm_to_whisper(speech.pcm, speech.sample_rate, 1), pause]
    samples = (np.concatenate(parts) * 32767).astype("<i2")
    return PcmAudio(samples.tobytes(), SAMPLE_RATE)


def _duration(audio: PcmAudio) -> float:
    return len(audio.pcm) / 2 / audio.channels / audio.sample_rate


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


def _words(text: str) -> list[str]:
    """Lower-case words, numbers in words ("50" is "fifty"), as Whisper's own scoring does."""
    text = re.sub(r"\d+", lambda m: f" {number_words(int(m.group(0)))} ", text.replace(",", ""))
    return re.sub(r"[^a-z' ]+", " ", text.lower().replace("-", " ")).split()


def _word_errors(said: str, heard: str) -> int:
    """Substitutions, insertions and deletions between the words said and heard."""
    ref, hyp = _words(said), _words(heard)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, got in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != got))
    return row[-1]


def _wer(said: str, heard: str) -> float:
    return _word_errors(said, heard) / max(1, len(_words(said)))
