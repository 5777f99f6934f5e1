"""``vllmchat doctor``'s voice lines: the engines, the models, the microphone and speakers."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from vllmchat.core.doctor import voice_checks
from vllmchat.core.doctor.findings import Status


def _doctor(*args: str, **env: str) -> tuple[dict[str, dict], str]:
    done = subprocess.run(
        [sys.executable, "-m", "vllmchat", "doctor", "--no-load", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, **env},
    )
    if "--json" not in args:
        return {}, done.stdout + done.stderr
    report = json.loads(done.stdout)
    return {f["key"]: f for f in report["findings"]}, done.stderr


def test_the_voice_here_hears_and_speaks_with_its_models() -> None:
    engines, models = voice_checks.voice_findings()
    assert engines.status is Status.OK and engines.detail.startswith("hears and speaks: ")
    assert engines.data["faster-whisper"] and engines.data["sherpa-onnx"]
    assert engines.data["espeak-ng"]
    assert models.status is Status.OK and models.data["missing"] == []


def test_what_the_voice_lacks_is_said_with_what_to_install(monkeypatch) -> None:
    real = importlib.util.find_spec
    gone: set[str] = set()
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a)
    )
    monkeypatch.setattr("ctypes.util.find_library", lambda name: None)
    gone.add("espeakng_loader")
    hears = voice_checks.voice_engines()
    assert hears.status is Status.INFO
    assert hears.detail.startswith("hears only (faster-whisper ")
    assert "espeak-ng missing" in hears.detail
    assert hears.fix == voice_checks.INSTALL_ESPEAK
    gone.update({"faster_whisper", "sherpa_onnx"})
    found = voice_checks.voice_findings()
    assert [f.key for f in found] == ["voice"]  # no engines: the models are not looked for
    assert found[0].status is Status.INFO
    assert found[0].detail == "not installed (optional): pip install 'vllmchat[voice]'"


def test_without_a_sound_server_doctor_says_there_is_no_microphone_and_stays_quiet() -> None:
    found, stderr = _doctor("--json", PULSE_SERVER="unix:/nonexistent/native")
    mic, speakers = found["microphone"], found["speakers"]
    assert mic["status"] == "info" and mic["detail"].startswith("No microphone found: ")
    assert "PulseAudio or PipeWire" in mic["detail"]
    assert speakers["status"] == "info"
    assert speakers["detail"].startswith("No speakers or headphones found")
    assert "pa_context_connect" not in stderr  # Qt's own complaints are in the data
    assert any("pa_context_connect" in m for m in mic["data"]["qt_messages"])
    no_audio, _ = _doctor("--json", "--no-audio")
    assert "microphone" not in no_audio and no_audio["voice"]["status"] == "ok"


@pytest.mark.skipif(shutil.which("pulseaudio") is None, reason="no pulseaudio here")
def test_with_a_sound_server_doctor_finds_the_microphone_opens_and_the_speakers(
    tmp_path,
) -> None:
    from tests.test_audio_pulse import Pulse

    pulse = Pulse(tmp_path)
    try:
        found, _ = _doctor("--json", **pulse.env)
        _, text = _doctor(**pulse.env)
    finally:
        pulse.close()
    mic = found["microphone"]
    assert mic["status"] == "ok"
    assert mic["detail"] == f"2 found, the default “Unix FIFO source {pulse.mic}” opens"
    assert {d["id"] for d in mic["data"]["inputs"]} == {"mic", "micf"}
    assert found["speakers"]["status"] == "ok"
    assert found["speakers"]["detail"] == "1 found, the default “Null Output”"
    assert f"[ok  ] Microphone: 2 found, the default “Unix FIFO source {pulse.mic}” opens" in text


def test_a_microphone_that_will_not_open_is_a_warning_with_its_fix() -> None:
    from vllmchat.audio.checks import _microphone
    from vllmchat.audio.devices import AudioDeviceInfo

    refused = (
        "The microphone “USB headset” could not be opened: another program may hold it, "
        "or this app may not use it (allow it in the system's privacy settings (Microphone))"
    )
    finding = _microphone([AudioDeviceInfo("usb", "USB headset", True)], refused, {})
    assert finding.status is Status.WARN
    assert finding.detail == f"1 found, the default “USB headset”: {refused}"
    assert "privacy settings" in finding.fix and finding.data["open_error"] == refused
