"""Another language: detected, or the one chosen, and written in its own words."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllmchat.core.voice.events import TranscriptionDone
from vllmchat.core.voice.transcriber import Transcriber, transcript

FRENCH = "Bonjour, je voudrais un café, s'il vous plaît."


@pytest.fixture(scope="module")
def french(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("espeakng_loader")
    path = tmp_path_factory.mktemp("speech") / "fr.wav"
    command = [sys.executable, "-m", "tests.espeak_speech", "fr", FRENCH, str(path)]
    subprocess.run(command, check=True, timeout=60)
    return path


@pytest.fixture(scope="module")
def transcriber() -> Iterator[Transcriber]:
    with Transcriber() as recogniser:
        yield recogniser


def test_french_is_detected_and_written_in_french(french: Path, transcriber: Transcriber) -> None:
    done = transcript(transcriber.transcribe_file(french))
    assert isinstance(done, TranscriptionDone)
    assert done.language == "fr"
    words = done.text.lower()
    assert "bonjour" in words and "café" in words and "plaît" in words


def test_a_chosen_language_is_the_one_written(french: Path, transcriber: Transcriber) -> None:
    done = transcript(transcriber.transcribe_file(french, language="en"))
    assert isinstance(done, TranscriptionDone) and done.language == "en"
    assert "plaît" not in done.text  # read as English, not French
