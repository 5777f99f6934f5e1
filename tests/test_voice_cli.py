"""``vllmchat transcribe FILE``: the words on standard output, a failure in one line."""

from __future__ import annotations

import multiprocessing
import wave
from pathlib import Path

import pytest

from vllmchat.cli import main
from vllmchat.core.voice.speaker import Speaker

SENTENCE = "The train to Berlin leaves at noon."


def _spoken_file(folder: Path) -> Path:
    """SENTENCE spoken by the voice, in a WAV file."""
    speech = Speaker().speak(SENTENCE)
    path = folder / "train.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(speech.sample_rate)
        out.writeframes(speech.pcm)
    return path


def test_transcribe_prints_the_words_of_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _spoken_file(tmp_path)
    assert main(["transcribe", str(path), "--language", "en"]) == 0
    printed = capsys.readouterr()
    recognisers = [p for p in multiprocessing.active_children() if p.name == "vllmchat-transcriber"]
    assert recognisers == []  # the command ends its recogniser
    assert printed.out.strip().lower().rstrip(".") == SENTENCE.lower().rstrip(".")


def test_an_empty_file_is_one_line_and_a_failing_exit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.wav"
    empty.touch()
    assert main(["transcribe", str(empty)]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (
        f"vllmchat transcribe: {empty}: the file is empty (0 bytes), there is no audio in it\n"
    )


def test_a_speech_model_not_downloaded_is_one_line_saying_how_to_get_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    path = _spoken_file(tmp_path)
    assert main(["transcribe", str(path), "--model", "whisper-small"]) == 1
    printed = capsys.readouterr()
    assert printed.out == ""
    lines = printed.err.splitlines()
    assert len(lines) == 1 and "whisper-small (486 MB) is not installed" in lines[0]
    assert "`vllmchat voice whisper-small`" in lines[0]


def test_a_damaged_or_unknown_speech_model_is_one_line_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllmchat.core.voice.models import voice_models_dir, whisper_model_dir

    base = whisper_model_dir()
    monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    damaged = voice_models_dir() / "whisper-small"
    damaged.mkdir()
    for file in base.iterdir():
        (damaged / file.name).write_bytes(file.read_bytes())
    with (damaged / "model.bin").open("r+b") as model:  # cut short, as a broken download
        model.truncate(model.seek(0, 2) // 2)
    path = _spoken_file(tmp_path)
    assert main(["transcribe", str(path), "--model", "whisper-small"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "the speech model whisper-small cannot be loaded" in lines[0]
    assert lines[0].endswith("download it again (`vllmchat voice whisper-small`)")
    assert main(["transcribe", str(path), "--model", "whisper-huge"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "vllmchat transcribe: there is no speech model 'whisper-huge' "
        "(there are: whisper-base, whisper-small)"
    ]
