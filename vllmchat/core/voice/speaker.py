"""Text to speech: a sentence in, 16-bit mono PCM out, through sherpa-onnx and a Piper voice.

sherpa-onnx (Apache-2.0) runs the voice's ONNX model; the phonemes it is given come
from eSpeak NG (``espeak_phonemes``), the one GPL piece, installed by the user.
Give it sentences that ``speech_text`` made speakable. A long sentence is spoken clause
by clause (cut at commas, semicolons and colons): each clause's audio can be handed on
as soon as it is made, and a stop asked for ends the sentence at the next clause.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import numpy as np

from vllmchat.core.settings import within_cores
from vllmchat.core.voice.espeak_phonemes import EspeakPhonemizer
from vllmchat.core.voice.models import PiperVoice, piper_voice

# Slower than half speed or faster than twice is hard to follow.
MIN_SPEED, MAX_SPEED = 0.5, 2.0
# A clause shorter than this is joined to the next (too short to sound natural alone).
MIN_CLAUSE = 40
# The first clause of a reply's first sentence may be this short: the sooner it is made,
# the sooner the reply is heard.
FIRST_CLAUSE = 20
# A first clause longer than this is cut before a joining word ("... water | that covers
# ..."), as a speaker takes a breath: its audio is then made in a third of the time.
FIRST_CLAUSE_MAX = 48
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+")
_JOINING = re.compile(
    r"\s+(?=(?:and|but|or|so|that|which|who|because|when|where|while|with|without|to|of"
    r"|in|on|for|from|into|about|after|before|than|as|like|if)\b)",
    re.IGNORECASE,
)


class SpeakerUnavailable(RuntimeError):
    """Text to speech cannot run here (sherpa-onnx, the voice or eSpeak NG missing)."""


@dataclass(frozen=True)
class Speech:
    """One sentence spoken: 16-bit little-endian mono PCM at ``sample_rate``."""

    text: str
    pcm: bytes
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


class Speaker:
    """One voice, loaded once; ``speak`` turns a sentence into PCM."""

    def __init__(self, voice: PiperVoice | None = None, *, threads: int = 2) -> None:
        try:
            sherpa: Any = import_module("sherpa_onnx")
        except ImportError as exc:
            raise SpeakerUnavailable("pip install sherpa-onnx (text to speech)") from exc
        self.voice = voice or piper_voice()
        self._phonemizer = EspeakPhonemizer(self.voice.espeak_voice)
        vits = sherpa.OfflineTtsVitsModelConfig(
            model=str(self.voice.model), tokens=str(self.voice.tokens)
        )
        model = sherpa.OfflineTtsModelConfig(
            vits=vits, num_threads=within_cores(threads), provider="cpu"
        )
        self._tts = sherpa.OfflineTts(sherpa.OfflineTtsConfig(model=model))
        self._generation = sherpa.GenerationConfig
        self.sample_rate = int(self._tts.sample_rate)

    def speak(
        self,
        sentence: str,
        *,
        speed: float = 1.0,
        stop: Callable[[], bool] | None = None,
        on_clause: Callable[[Speech], None] | None = None,
        quick_start: bool = False,
        pace: Callable[[], None] | None = None,
        cores: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> Speech:
        """``sentence`` as speech; no audio for text with nothing to say. ``on_clause`` is
        given each clause's audio as soon as it is made; once ``stop`` says so, no more
        clauses are made and the sentence's audio so far is returned. ``quick_start``:
        its first clause may be as short as ``FIRST_CLAUSE`` (a reply's first words).
        ``pace`` is called before each later clause is made, and may wait. Each clause
        is made within ``cores()`` (a core the engine lends while a reply decodes)."""
        first = FIRST_CLAUSE if quick_start else MIN_CLAUSE
        clauses = [
            (text, self._phonemizer.phonemes(text)) for text in clauses_of(sentence, first=first)
        ]
        clauses = [(text, ph) for text, ph in clauses if any(ch.isalpha() for ch in ph)]
        if not clauses:
            return Speech(sentence, b"", self.sample_rate)
        config = self._generation()
        config.sid = 0
        config.speed = min(max(speed, MIN_SPEED), MAX_SPEED)
        config.phoneme_codepoints = [[ord(ch) for ch in ph] for _, ph in clauses]
        made: list[bytes] = []
        turn = ExitStack()  # the core borrowed for the clause being made

        def clause_made(samples: Any, _progress: float) -> int:
            turn.close()  # the core goes back while the clause is handed on and paced
            pcm = _pcm16(samples)
            if on_clause is not None:
                on_clause(
                    Speech(clauses[min(len(made), len(clauses) - 1)][0], pcm, self.sample_rate)
                )
            made.append(pcm)
            if pace is not None and len(made) < len(clauses):
                pace()
            if stop is not None and stop():
                return 0
            if cores is not None and len(made) < len(clauses):
                turn.enter_context(cores())
            return 1

        if stop is not None and stop():
            return Speech(sentence, b"", self.sample_rate)
        with turn:
            if cores is not None:
                turn.enter_context(cores())
            self._tts.generate(sentence, config, clause_made)
        return Speech(sentence, b"".join(made), self.sample_rate)


def clauses_of(sentence: str, *, first: int = MIN_CLAUSE) -> list[str]:
    """``sentence`` cut after its commas, semicolons and colons, into clauses of at least
    ``MIN_CLAUSE`` characters (the first: ``first``; the last may be shorter)."""
    out: list[str] = []
    for piece in _CLAUSE_END.split(sentence.strip()):
        if out and len(out[-1]) < (first if len(out) == 1 else MIN_CLAUSE):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    if len(out) > 1 and len(out[-1]) < MIN_CLAUSE // 2:
        last = out.pop()
        out[-1] = f"{out[-1]} {last}"
    if first < MIN_CLAUSE and out and len(out[0]) > FIRST_CLAUSE_MAX:
        out[:1] = _breath(out[0])
    return [clause for clause in out if clause]


def _breath(clause: str) -> list[str]:
    """A long first clause cut before its last joining word within ``FIRST_CLAUSE_MAX``
    characters (not before ``FIRST_CLAUSE``, nor leaving less than ``MIN_CLAUSE``)."""
    cuts = [
        m.start()
        for m in _JOINING.finditer(clause)
        if FIRST_CLAUSE <= m.start() <= FIRST_CLAUSE_MAX and len(clause) - m.start() > MIN_CLAUSE
    ]
    if not cuts:
        return [clause]
    return [clause[: cuts[-1]], clause[cuts[-1] :].strip()]


def _pcm16(samples: Any) -> bytes:
    floats = np.asarray(samples, dtype=np.float32)
    return (np.clip(floats, -1.0, 1.0) * 32767).astype("<i2").tobytes()
