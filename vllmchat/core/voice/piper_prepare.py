"""A Piper voice prepared for sherpa-onnx: its folder of model, tokens and config.

Piper's ``.onnx`` carries no metadata and its phoneme ids sit in its JSON config;
sherpa-onnx reads both from the model and a ``tokens.txt``. The metadata is appended
to the ONNX file's protobuf (which merges repeated fields), as sherpa-onnx's own
converter would have written it. The folder is made under a temporary name and
renamed into place, so a voice folder is whole or absent.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from vllmchat.core.paths import put_folder, staging_for

MODEL_FILE = "model.onnx"
TOKENS_FILE = "tokens.txt"
CONFIG_FILE = "voice.json"
VOICE_FILES = (MODEL_FILE, TOKENS_FILE, CONFIG_FILE)


class VoiceConfigError(ValueError):
    """A Piper voice's JSON config cannot be read or lacks what the voice needs."""


def read_config(path: Path) -> dict[str, object]:
    """A voice's JSON config, checked for what sherpa-onnx and the picker need."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VoiceConfigError(f"{path.name} cannot be read ({exc})") from exc
    if not isinstance(config, dict):
        raise VoiceConfigError(f"{path.name} is not a JSON object")
    audio, espeak, ids = config.get("audio"), config.get("espeak"), config.get("phoneme_id_map")
    if not isinstance(audio, dict) or not isinstance(audio.get("sample_rate"), int):
        raise VoiceConfigError(f"{path.name} names no sample rate")
    if not isinstance(espeak, dict) or not isinstance(espeak.get("voice"), str):
        raise VoiceConfigError(f"{path.name} names no eSpeak voice")
    if not isinstance(ids, dict) or not ids:
        raise VoiceConfigError(f"{path.name} has no phoneme ids")
    return config


def prepare_voice(onnx: Path, config_file: Path, target: Path, *, move: bool = False) -> Path:
    """Make ``target`` a voice folder from Piper's ``onnx`` and its ``config_file``;
    ``move`` takes the files (a download) instead of copying them (a package's)."""
    config = read_config(config_file)
    staging = staging_for(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        if move:
            os.replace(onnx, staging / MODEL_FILE)
        else:
            shutil.copyfile(onnx, staging / MODEL_FILE)
        with (staging / MODEL_FILE).open("ab") as fh:
            fh.write(onnx_metadata(sherpa_metadata(config)))
        (staging / TOKENS_FILE).write_text(tokens_text(config), encoding="utf-8")
        shutil.copyfile(config_file, staging / CONFIG_FILE)
        if move:
            config_file.unlink(missing_ok=True)
        put_folder(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def tokens_text(config: dict[str, object]) -> str:
    """``tokens.txt``: each phoneme and its id, one a line."""
    ids = config["phoneme_id_map"]
    assert isinstance(ids, dict)
    return "".join(f"{phoneme} {numbers[0]}\n" for phoneme, numbers in ids.items())


def sherpa_metadata(config: dict[str, object]) -> dict[str, str]:
    """What sherpa-onnx reads from a Piper model's metadata (its own converter writes these)."""
    audio = config["audio"]
    espeak = config["espeak"]
    language = config.get("language", {})
    assert isinstance(audio, dict) and isinstance(espeak, dict) and isinstance(language, dict)
    return {
        "model_type": "vits",
        "comment": "piper",
        "language": str(language.get("name_english", "English")),
        "voice": str(espeak["voice"]),
        "has_espeak": "1",
        "n_speakers": str(config.get("num_speakers", 1)),
        "sample_rate": str(audio["sample_rate"]),
    }


def onnx_metadata(entries: dict[str, str]) -> bytes:
    """ONNX ``ModelProto.metadata_props`` (field 14) entries, serialized to append."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            low, n = n & 0x7F, n >> 7
            out.append(low | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def field(number: int, data: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(data)) + data

    return b"".join(
        field(14, field(1, key.encode()) + field(2, value.encode()))
        for key, value in entries.items()
    )
