"""Audio converted between a device's format and the voice's, and the player's queue (no Qt)."""

from __future__ import annotations

import numpy as np
import pytest

from vllmchat.audio.pcm import (
    MIC_FORMAT,
    PcmConverter,
    PcmFormat,
    convert,
    from_float,
    rms_level,
    to_float,
)
from vllmchat.audio.playback_queue import PlaybackQueue

STEREO_48K_FLOAT = PcmFormat(48000, 2, "<f4")


def _tone(hz: float, rate: int, seconds: float, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def _frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


def test_16_khz_mono_int16_passes_through_sample_for_sample() -> None:
    pcm = np.random.default_rng(3).integers(-32768, 32767, 16000, dtype=np.int16)
    data = pcm.astype("<i2").tobytes()
    converter = PcmConverter(MIC_FORMAT, MIC_FORMAT)
    assert converter.passthrough
    assert b"".join(converter.feed(data[i : i + 333]) for i in range(0, len(data), 333)) == data


def test_48_khz_stereo_float_becomes_16_khz_mono_with_its_pitch_and_loudness() -> None:
    tone = _tone(440, 48000, 1.0)
    stereo = np.stack([tone, tone], axis=1).reshape(-1).astype("<f4").tobytes()
    mono = np.frombuffer(convert(stereo, STEREO_48K_FLOAT, MIC_FORMAT), dtype="<i2")
    assert abs(len(mono) - 16000) <= 2
    assert _frequency(mono.astype(np.float32), 16000) == pytest.approx(440, abs=2)
    assert rms_level(mono.tobytes()) == pytest.approx(0.5 / np.sqrt(2), rel=0.03)


def test_chunks_of_any_size_convert_as_the_whole_does() -> None:
    """Chunks split frames and samples anywhere: the result has no seams."""
    tone = _tone(300, 48000, 0.5)
    stereo = np.stack([tone, -tone], axis=1).reshape(-1).astype("<f4")
    stereo[1::2] = stereo[::2]  # both channels alike
    data = stereo.tobytes()
    whole = convert(data, STEREO_48K_FLOAT, MIC_FORMAT)
    converter = PcmConverter(STEREO_48K_FLOAT, MIC_FORMAT)
    sizes = np.random.default_rng(5).integers(1, 4000, 400)
    pieces, at = [], 0
    for size in sizes:
        pieces.append(converter.feed(data[at : at + int(size)]))
        at += int(size)
        if at >= len(data):
            break
    chunked = b"".join(pieces)
    assert chunked == whole


def test_what_16_khz_cannot_carry_is_filtered_out_not_folded_down() -> None:
    """A 12 kHz tone at 48 kHz would alias to 4 kHz at 16 kHz without the low-pass filter."""
    tone = _tone(12000, 48000, 0.5)
    mono = convert(tone.astype("<f4").tobytes(), PcmFormat(48000, 1, "<f4"), MIC_FORMAT)
    assert rms_level(mono) < 0.01


def test_8_khz_and_22_khz_go_up_and_down_keeping_the_pitch() -> None:
    for rate_in, rate_out in ((8000, 16000), (22050, 48000), (22050, 16000)):
        tone = from_float(_tone(500, rate_in, 1.0), PcmFormat(rate_in))
        out = convert(tone, PcmFormat(rate_in), PcmFormat(rate_out))
        samples = to_float(out, PcmFormat(rate_out))
        assert abs(len(samples) - rate_out) <= 2
        assert _frequency(samples, rate_out) == pytest.approx(500, abs=2)


def test_every_sample_type_round_trips() -> None:
    tone = _tone(440, 16000, 0.1, amplitude=0.9)
    for sample_type, tolerance in (("u1", 1 / 100), ("<i2", 1e-4), ("<i4", 1e-6), ("<f4", 1e-7)):
        fmt = PcmFormat(16000, 2, sample_type)
        back = to_float(from_float(tone, fmt), fmt)
        assert np.max(np.abs(back - tone)) < tolerance, sample_type
    with pytest.raises(ValueError, match="unsupported sample type"):
        PcmFormat(16000, 1, "<f8")


def test_the_level_runs_from_silence_to_full_scale() -> None:
    assert rms_level(b"") == 0.0
    assert rms_level(b"\0\0" * 480) == 0.0
    loud = np.array([32767, -32768] * 240, dtype="<i2").tobytes()
    assert rms_level(loud) == pytest.approx(1.0, abs=1e-4)
    assert rms_level(from_float(_tone(440, 16000, 0.03), MIC_FORMAT)) == pytest.approx(
        0.5 / np.sqrt(2), rel=0.03
    )


def test_the_queue_holds_pieces_in_the_outputs_format_and_gives_whole_frames() -> None:
    queue = PlaybackQueue(PcmFormat(48000, 2, "<i2"))
    second = from_float(_tone(440, 22050, 1.0), PcmFormat(22050))
    queue.add(second, 22050)
    queue.add(second[:22050], 22050)  # half a second
    assert queue.seconds == pytest.approx(1.5, abs=0.001)
    taken = queue.take(1001)  # not a whole frame: 250 frames of 4 bytes
    assert len(taken) == 1000
    rest = queue.take(10**9)
    assert len(taken) + len(rest) == pytest.approx(1.5 * 48000 * 4, abs=16)
    assert queue.size == 0 and queue.take(4000) == b""
    queue.add(second, 22050)
    queue.clear()
    assert queue.size == 0 and queue.seconds == 0.0
