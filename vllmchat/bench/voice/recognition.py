"""What the recogniser makes of the voice's speech and of espeak-ng's, of silence and noise.

Each sentence is spoken, then recognised on its own (as a chat's utterances are), and
scored with ``scoring``'s normaliser. The Piper voice is the app's own; espeak-ng is a
second, very different (formant, robotic) voice, run from its command where installed.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vllmchat.bench.voice.scoring import Scored, scored, word_errors
from vllmchat.core.voice.events import TranscriptionDone
from vllmchat.core.voice.speaker import Speaker, Speech
from vllmchat.core.voice.transcriber import PcmAudio, Transcriber, transcript


@dataclass(frozen=True)
class Heard:
    """A set of sentences heard back, scored, with each sentence's wait for its text."""

    score: Scored
    latencies: tuple[float, ...]


def speak_all(speaker: Speaker, sentences: tuple[str, ...]) -> tuple[list[Speech], list[float]]:
    """Each sentence spoken by the voice, with the seconds each took to make."""
    spoken, times = [], []
    speaker.speak("Warm up.")
    for sentence in sentences:
        started = time.perf_counter()
        spoken.append(speaker.speak(sentence))
        times.append(time.perf_counter() - started)
    return spoken, times


def espeak_all(sentences: tuple[str, ...]) -> list[PcmAudio] | None:
    """Each sentence spoken by espeak-ng's default American voice (None: not installed)."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        return None
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for i, sentence in enumerate(sentences):
            path = Path(folder) / f"{i}.wav"
            subprocess.run([binary, "-v", "en-us", "-w", str(path), sentence], check=True)
            out.append(_wav_pcm(path))
    return out


def _wav_pcm(path: Path) -> PcmAudio:
    import wave

    with wave.open(str(path), "rb") as wav:
        frames = wav.readframes(wav.getnframes())
        return PcmAudio(frames, wav.getframerate(), wav.getnchannels())


def recognised(
    transcriber: Transcriber, sentences: tuple[str, ...], audio: list[PcmAudio], *, beam: int
) -> Heard:
    """Each recording recognised on its own (English), scored against what was said."""
    heard, latencies = [], []
    for recording in audio:
        started = time.perf_counter()
        done = transcript(transcriber.transcribe_pcm(recording, language="en", beam_size=beam))
        latencies.append(time.perf_counter() - started)
        heard.append(done.text if isinstance(done, TranscriptionDone) else "")
    return Heard(scored(sentences, heard), tuple(latencies))


def as_audio(spoken: list[Speech]) -> list[PcmAudio]:
    return [PcmAudio(speech.pcm, speech.sample_rate) for speech in spoken]


def detection_cost(transcriber: Transcriber, spoken: list[Speech]) -> float:
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


def invented_words(transcriber: Transcriber) -> dict[str, int]:
    """Words recognised in 30 s of silence and of white noise (language detected)."""
    rng = np.random.default_rng(3)
    silence = np.zeros(16000 * 30, dtype="<i2")
    noise = rng.normal(0, 3000, 16000 * 30).clip(-32768, 32767).astype("<i2")
    counts = {}
    for name, audio in (("silence", silence), ("noise", noise)):
        done = transcript(transcriber.transcribe_pcm(PcmAudio(audio.tobytes(), 16000)))
        text = done.text if isinstance(done, TranscriptionDone) else ""
        counts[f"hallucinated_words_{name}"] = word_errors("", text)
    return counts


def joined(spoken: list[Speech], pause_s: float = 0.4) -> PcmAudio:
    """The sentences one after another, at 16 kHz, with a short pause between them."""
    from vllmchat.core.voice.transcriber_process import SAMPLE_RATE, pcm_to_whisper

    pause = np.zeros(int(pause_s * SAMPLE_RATE), dtype=np.float32)
    parts = []
    for speech in spoken:
        parts += [pcm_to_whisper(speech.pcm, speech.sample_rate, 1), pause]
    samples = (np.concatenate(parts) * 32767).astype("<i2")
    return PcmAudio(samples.tobytes(), SAMPLE_RATE)


def duration(audio: PcmAudio) -> float:
    return len(audio.pcm) / 2 / audio.channels / audio.sample_rate
