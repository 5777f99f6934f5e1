"""``vllmchat chat --voice``: a spoken turn heard and answered; no microphone, typed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import terminal_chat

QUESTION = "What is the capital of France?"


def test_without_a_microphone_the_chat_goes_on_typed(demo_model, tmp_path: Path) -> None:
    env = dict(os.environ, PULSE_SERVER=f"unix:{tmp_path / 'no-server'}", HOME=str(tmp_path))
    env.update(VLLMCHAT_DATA_DIR=str(tmp_path / "data"), VLLMCHAT_CONFIG_DIR=str(tmp_path / "c"))
    proc = terminal_chat(
        "Hello there\n/quit\n", "--voice", "--max-tokens", "8", "--temperature", "0", env=env
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "voice: " in out and "microphone" in out.lower()  # said once, in one line
    assert "type your messages" in out
    assert out.count("ai> ") == 1  # the typed message was answered


def _speech_16k(text: str) -> bytes:
    from vllmchat.core.voice.speaker import Speaker

    speech = Speaker(threads=1).speak(text)
    samples = np.frombuffer(speech.pcm, dtype="<i2").astype(np.float32)
    count = int(len(samples) * 16000 / speech.sample_rate)
    resampled = np.interp(np.linspace(0, len(samples) - 1, count), np.arange(len(samples)), samples)
    silence = np.zeros(16000 * 2)
    return np.concatenate([np.zeros(8000), resampled, silence]).astype("<i2").tobytes()


class Microphone:
    """Samples written to the fifo as fast as a microphone makes them: silence until
    ``say`` hands over speech, silence after it, until ``off``."""

    def __init__(self, fifo: Path) -> None:
        self.fifo = fifo
        self.speech = b""
        self.lock = threading.Lock()
        self.on = True
        threading.Thread(target=self._run, daemon=True).start()

    def say(self, pcm: bytes) -> None:
        with self.lock:
            self.speech += pcm

    def _run(self) -> None:
        step = 640  # 20 ms
        started, sent = time.perf_counter(), 0
        with self.fifo.open("wb", buffering=0) as pipe:
            while self.on:
                with self.lock:
                    chunk, self.speech = self.speech[:step], self.speech[step:]
                pipe.write(chunk.ljust(step, b"\0"))
                sent += step
                time.sleep(max(0.0, started + sent / 32000 - time.perf_counter()))


@pytest.fixture
def pulse_with_a_fifo_microphone(tmp_path: Path):
    """A private PulseAudio daemon: a null sink for the speakers, a fifo for the microphone."""
    if shutil.which("pulseaudio") is None:
        pytest.skip("pulseaudio is not installed (apt-get install pulseaudio)")
    home = tmp_path / "pulse"
    home.mkdir()
    fifo = home / "mic.fifo"
    env = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR=str(home))
    env.pop("PULSE_SERVER", None)
    subprocess.run(
        [
            "pulseaudio",
            "-D",
            "-n",
            "--exit-idle-time=-1",
            "--load=module-native-protocol-unix",
            "--load=module-null-sink sink_name=speakers",
            f"--load=module-pipe-source source_name=mic file={fifo} format=s16le rate=16000 "
            "channels=1",
        ],
        env=env,
        check=True,
        timeout=30,
    )
    try:
        yield env, fifo
    finally:
        subprocess.run(["pulseaudio", "--kill"], env=env, timeout=30)


def test_a_spoken_question_is_heard_answered_and_spoken(
    demo_model, tmp_path: Path, pulse_with_a_fifo_microphone
) -> None:
    env, fifo = pulse_with_a_fifo_microphone
    env.update(VLLMCHAT_DATA_DIR=str(tmp_path / "data"), VLLMCHAT_CONFIG_DIR=str(tmp_path / "c"))
    pcm = _speech_16k(QUESTION)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllmchat", "chat", "--voice", "--max-tokens", "12"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    out = ""
    microphone = Microphone(fifo)
    try:
        while "you (speak" not in out:
            out += proc.stdout.read(1)
        microphone.say(pcm)
        while out.count("you (speak") < 2:  # heard, answered, spoken: listening again
            char = proc.stdout.read(1)
            assert char, proc.stderr.read() if proc.stderr else ""
            out += char
        proc.stdin.write("/quit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        microphone.on = False
        if proc.poll() is None:
            proc.kill()
    heard = out.split("you (speak; Enter ends) > ")[1].split("\b")[-1]
    # Whisper base sometimes hears "France" as "friends" (the voice's own sentence), and a
    # starved machine may lose a short word on its way through the sound server.
    assert "what" in heard.lower() and "capital of" in heard.lower()
    assert "ai> " in out


def test_a_speech_model_not_downloaded_is_said_and_the_chat_goes_on(
    demo_model, tmp_path: Path
) -> None:
    env = dict(os.environ, PULSE_SERVER=f"unix:{tmp_path / 'no-server'}", HOME=str(tmp_path))
    env.update(VLLMCHAT_DATA_DIR=str(tmp_path / "data"), VLLMCHAT_CONFIG_DIR=str(tmp_path / "c"))
    env.update(VLLMCHAT_CACHE_DIR=str(tmp_path / "cache"))
    args = ("--voice", "--speech-model", "whisper-small", "--max-tokens", "8", "--temperature", "0")
    proc = terminal_chat("Hello there\n/quit\n", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stdout.splitlines() if "whisper-small" in line]
    assert len(said) == 1 and "not installed" in said[0]
    assert "`vllmchat voice whisper-small`" in said[0]
    assert proc.stdout.count("ai> ") == 1  # the typed message was answered
