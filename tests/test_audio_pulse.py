"""Recording and playing through a real sound server: a private PulseAudio daemon.

It runs where the ``pulseaudio`` binary exists (skipped elsewhere), in a temporary
folder: its microphones are FIFOs the test writes speech into, in real time, as a
microphone would deliver it; its output is a null sink whose monitor shows what was
heard. Qt Multimedia connects to the sound server once per process, so each case
runs in a child process started with ``PULSE_SERVER`` pointing at the daemon.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import subprocess
import threading
import time
import wave
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vllmchat.audio.pcm import MIC_FORMAT, PcmFormat, convert

pytestmark = pytest.mark.skipif(
    shutil.which("pulseaudio") is None or shutil.which("pactl") is None,
    reason="no pulseaudio here",
)

SENTENCE = "Please turn off the lights in the kitchen before you leave."
CHUNK = 960  # 30 ms at 16 kHz mono


class Pulse:
    """A private daemon: its socket, and the FIFOs behind its microphones."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.mic = folder / "mic.fifo"
        self.micf = folder / "micf.fifo"
        self.env = {
            "HOME": str(folder),
            "XDG_RUNTIME_DIR": str(folder),
            "PULSE_SERVER": f"unix:{folder / 'native'}",
        }
        self.process = subprocess.Popen(
            [
                "pulseaudio",
                "--daemonize=no",
                "-n",
                "--exit-idle-time=-1",
                "--use-pid-file=no",
                f"--load=module-native-protocol-unix socket={folder / 'native'}",
                "--load=module-null-sink sink_name=out",
                f"--load=module-pipe-source source_name=mic file={self.mic} "
                "format=s16le rate=16000 channels=1",
                f"--load=module-pipe-source source_name=micf file={self.micf} "
                "format=float32le rate=16000 channels=1",
            ],
            env={**os.environ, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while not (self.micf.exists() and self.pactl("info").returncode == 0):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                pytest.skip("the private pulseaudio daemon did not start")
            time.sleep(0.1)

    def pactl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pactl", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def pulse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulse]:
    daemon = Pulse(tmp_path_factory.mktemp("pulse"))
    yield daemon
    daemon.close()


@pytest.fixture(scope="module")
def speech16k(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A sentence spoken by the Piper voice into a WAV file, read at the microphone's 16 kHz."""
    from vllmchat.core.voice.speaker import Speaker

    spoken = Speaker().speak(SENTENCE)
    path = tmp_path_factory.mktemp("speech") / "sentence.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(spoken.sample_rate)
        out.writeframes(spoken.pcm)
    with wave.open(str(path), "rb") as wav:
        pcm, rate = wav.readframes(wav.getnframes()), wav.getframerate()
    return convert(pcm, PcmFormat(rate), MIC_FORMAT)


def _in_child(pulse: Pulse, job: Callable[..., Any], *args: Any) -> Any:
    """``job(*args)`` in a fresh process that talks to ``pulse``; its result."""
    context = multiprocessing.get_context("spawn")
    saved = {k: os.environ.get(k) for k in pulse.env}
    os.environ.update(pulse.env)
    try:
        with context.Pool(1) as pool:
            return pool.apply_async(job, args).get(timeout=120)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _feed(fifo: str, data: bytes, chunk: int, delay_s: float = 0.3) -> threading.Thread:
    """Write ``data`` into a FIFO microphone in real time (30 ms pieces), as a mic would."""

    def write() -> None:
        time.sleep(delay_s)
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as fh:
            for at in range(0, len(data), chunk):
                fh.write(data[at : at + chunk])  # the pipe breaks where the mic is unplugged
                fh.flush()
                time.sleep(0.03)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _run_qt_until(done: Callable[[], bool], timeout_s: float) -> None:
    from PySide6.QtCore import QCoreApplication

    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        QCoreApplication.processEvents()
        time.sleep(0.005)


def record_job(
    device: str, fifo: str, data: bytes, chunk: int, capture: PcmFormat | None, unplug: str
) -> dict[str, Any]:
    """Record while ``data`` is fed; with ``unplug``, unload that module halfway."""
    from vllmchat.audio.devices import input_devices
    from vllmchat.audio.recorder import Recorder

    chunks: list[bytes] = []
    failures: list[str] = []
    levels: list[float] = []
    recorder = Recorder(
        device, on_pcm=chunks.append, on_failed=failures.append, capture_format=capture
    )
    recorder.start()
    feeder = _feed(fifo, data, chunk)
    if unplug:
        _run_qt_until(lambda: len(chunks) > 20, 10)
        subprocess.run(["pactl", "unload-module", unplug], check=True, timeout=20)
        _run_qt_until(lambda: bool(failures), 10)
    else:
        while feeder.is_alive():
            _run_qt_until(lambda: not feeder.is_alive(), 0.05)
            levels.append(recorder.level)
        _run_qt_until(lambda: False, 0.5)
    recorder.stop()
    return {
        "pcm": b"".join(chunks),
        "sizes": [len(c) for c in chunks],
        "failures": failures,
        "max_level": max(levels, default=0.0),
        "inputs": [d.id for d in input_devices()],
        "device": recorder.device.id if recorder.device else None,
    }


def test_speech_fed_to_the_microphone_comes_back_sample_for_sample(pulse, speech16k) -> None:
    silence = b"\0\0" * 1600
    fed = silence + speech16k + silence
    got = _in_child(pulse, record_job, "", str(pulse.mic), fed, CHUNK, None, "")
    assert got["failures"] == [] and got["device"] == "mic"
    assert {"mic", "micf"} <= set(got["inputs"])
    assert set(got["sizes"][:-1]) == {CHUNK}  # ~30 ms chunks; the last one shorter
    assert speech16k in got["pcm"]  # the voice's samples, unchanged
    assert 0.05 < got["max_level"] <= 1.0


def test_a_float_microphone_is_converted_to_int16_sample_for_sample(pulse, speech16k) -> None:
    """A device that records in another format (here float) gives the same samples.

    (48 kHz stereo to 16 kHz mono is checked in ``test_audio_pcm``: Qt 6.11's PulseAudio
    source drops blocks of an unclocked FIFO source from about 192 kB/s, where parec
    reads it all, so a FIFO cannot stand for a 48 kHz stereo microphone here.)
    """
    padded = speech16k + b"\0\0" * 4800  # the microphone goes on after the speech
    floats = convert(padded, MIC_FORMAT, PcmFormat(16000, 1, "<f4"))
    got = _in_child(
        pulse,
        record_job,
        "micf",
        str(pulse.micf),
        floats,
        480 * 4,
        PcmFormat(16000, 1, "<f4"),
        "",
    )
    assert got["failures"] == [] and got["device"] == "micf"
    assert speech16k in got["pcm"]


def test_a_microphone_unplugged_mid_recording_is_said_once_and_keeps_what_was_recorded(
    pulse, speech16k
) -> None:
    fifo = pulse.folder / "usb.fifo"
    loaded = pulse.pactl(
        "load-module",
        "module-pipe-source",
        "source_name=usb",
        f"file={fifo}",
        "format=s16le",
        "rate=16000",
        "channels=1",
    )
    module = loaded.stdout.strip()
    assert loaded.returncode == 0 and module
    got = _in_child(pulse, record_job, "usb", str(fifo), speech16k, CHUNK, None, module)
    assert len(got["failures"]) == 1
    assert got["failures"][0].startswith("The microphone “") and "unplugged" in got["failures"][0]
    assert len(got["pcm"]) >= 20 * CHUNK  # what was recorded before is kept
    assert got["pcm"] == speech16k[: len(got["pcm"])]  # the speech as fed, up to the unplug


def play_job(pcm: bytes, rate: int, stop_after_s: float) -> dict[str, Any]:
    """Play ``pcm``; stop after ``stop_after_s`` of it has been played (0: play it all)."""
    from vllmchat.audio.player import Player
    from vllmchat.audio.qt_audio import QtAudio

    player = Player()
    idle: list[float] = []
    player.idle.connect(lambda: idle.append(time.monotonic()))
    player.play(pcm, rate)
    sink = player._sink  # its clock and state are the measure
    result: dict[str, Any] = {"format": player.output_format}
    if not stop_after_s:
        _run_qt_until(lambda: bool(idle), 30)
        result.update(idle=bool(idle), written=player.bytes_written)
        return result
    _run_qt_until(lambda: sink.processedUSecs() >= stop_after_s * 1e6, 30)
    result["queued_before"] = player.seconds_queued
    processed = sink.processedUSecs()
    started = time.perf_counter()
    player.stop()
    stopped = sink.state() == QtAudio.State.StoppedState
    result["stop_s"] = time.perf_counter() - started
    written = player.bytes_written
    _run_qt_until(lambda: False, 0.5)
    result.update(
        stopped=stopped,
        processed_s=processed / 1e6,
        written_after=player.bytes_written - written,
        queued_after=player.seconds_queued,
        idle=bool(idle),
    )
    return result


def test_speech_plays_to_the_end_and_the_player_goes_idle(pulse, speech16k) -> None:
    got = _in_child(pulse, play_job, speech16k[: 16000 * 2], 16000, 0.0)
    assert got["idle"]
    fmt = got["format"]
    assert got["written"] == pytest.approx(fmt.bytes_per_frame * fmt.sample_rate, rel=0.01)


def test_barge_in_stops_the_speech_at_once(pulse) -> None:
    """stop() → the sink Stopped, nothing more written, and the output silent: the
    null sink's monitor hears the tone end where playback was stopped (-35 to +56 ms
    measured here: the null sink's blocks), well within the 200 ms asked of barge-in."""
    monitor = pulse.folder / "monitor.raw"
    with monitor.open("wb") as out:
        recorder = subprocess.Popen(
            [
                "parec",
                "-d",
                "out.monitor",
                "--raw",
                "--format=s16le",
                "--rate=16000",
                "--channels=1",
                "--latency-msec=10",
            ],
            env={**os.environ, **pulse.env},
            stdout=out,
        )
        time.sleep(0.5)
        t = np.arange(22050 * 4) / 22050
        tone = (np.sin(2 * np.pi * 440 * t) * 12000).astype("<i2").tobytes()
        got = _in_child(pulse, play_job, tone, 22050, 1.0)
        time.sleep(0.3)
        recorder.terminate()
        recorder.wait(timeout=10)
    assert got["stopped"] and got["written_after"] == 0 and got["queued_after"] == 0.0
    assert got["queued_before"] > 2.0 and not got["idle"]
    assert got["stop_s"] < 0.05
    heard = np.abs(np.frombuffer(monitor.read_bytes(), dtype="<i2")) > 2000
    loud = np.nonzero(heard)[0]
    heard_s = (loud[-1] - loud[0]) / 16000
    print(
        f"barge-in: stop() took {got['stop_s'] * 1000:.2f} ms; the monitor heard "
        f"{(heard_s - got['processed_s']) * 1000:.0f} ms after the stop point"
    )
    assert got["processed_s"] - 0.1 < heard_s < got["processed_s"] + 0.15
