"""The voice's figures, each with its target and whether this run met it."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

# (key in the results, what it is, comparison, target); a target of None: reported only.
TABLE: tuple[tuple[str, str, str, float | None], ...] = (
    ("stt_rtf", "speech-to-text real-time factor, base int8", "<=", 0.5),
    ("wer_round_trip", "word error rate, 30+30 sentences, Piper and espeak-ng", "<=", 0.05),
    ("wer_tts", "word error rate, Harvard sentences spoken by Piper", "<=", 0.05),
    ("wer_tts_chat", "word error rate, chat sentences spoken by Piper", "<=", 0.05),
    ("wer_espeak", "word error rate, Harvard sentences spoken by espeak-ng", "<=", 0.05),
    ("wer_espeak_chat", "word error rate, chat sentences spoken by espeak-ng", "<=", 0.05),
    ("listen_ptt_s", "end of speech -> transcript, push-to-talk (ListenSession)", "<=", 1.0),
    ("listen_hands_free_s", "end of speech -> transcript, hands-free (silence wait in)", "<=", 1.0),
    ("stt_latency_s_median", "a finished sentence -> its transcript (recogniser alone)", "<=", 1.0),
    ("first_audio_s", "first audio after the first sentence is complete (speaking)", "<=", 0.5),
    ("tts_first_audio_s_median", "one sentence synthesised (voice alone)", "<=", 0.5),
    ("tts_rtf", "text-to-speech real-time factor", "<=", 0.3),
    ("barge_in_s", "barge-in: stop_speaking() -> nothing more to play, worst", "<=", 0.2),
    ("barge_in_synthesis_end_s", "barge-in: stop_speaking() -> synthesis ended, worst", "<=", 0.2),
    ("sink_stop_s", "barge-in: the audio output's stop", "<=", 0.2),
    ("hallucinated_words_silence", "words invented on 30 s of silence", "<=", 0),
    ("hallucinated_words_noise", "words invented on 30 s of noise", "<=", 0),
    ("decode_ratio_speaking", "chat decode speed while speaking / without", ">=", 0.9),
    ("decode_ratio_speaking_long", "the same, a 512-token reply", ">=", 0.9),
    ("stt_load_s", "recogniser load time (process and model), s", "", None),
    ("tts_load_s", "voice load time, s", "", None),
    ("stt_peak_rss_mb", "recogniser peak memory, MB", "", None),
    ("tts_rss_mb", "voice memory, MB", "", None),
)
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {"<=": operator.le, ">=": operator.ge}
_SIGN = {"<=": "≤", ">=": "≥"}


def figures(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each figure of the table: its value (None: not measured here), target and ok."""
    table = {}
    for key, what, compare, target in TABLE:
        value = result.get(key)
        ok = None
        if target is not None and isinstance(value, int | float):
            ok = _COMPARE[compare](value, target)
        table[key] = {
            "figure": what,
            "value": value,
            "target": f"{_SIGN[compare]} {target}" if target is not None else "reported",
            "ok": ok,
        }
        note = result.get(key.removesuffix("_s") + "_note") or result.get(f"{key}_note")
        if value is None and note:
            table[key]["note"] = note
    return table
