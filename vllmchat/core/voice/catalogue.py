"""The voice's models a user can download from Hugging Face.

Whisper ``base`` and ``small`` converted for CTranslate2 (what faster-whisper runs) and
a few Piper voices of ``rhasspy/piper-voices``, medium quality. ``base`` is the
recogniser by default: it gives a sentence's transcript in about half a second on two
cores. ``small`` mishears less, and takes about three times as long. The sizes are what the picker
shows before asking; the download itself takes each file's size and SHA-256 from the
hub, as a GGUF's download does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

WHISPER_REPO = "Systran/faster-whisper-base"
PIPER_REPO = "rhasspy/piper-voices"
PIPER_REVISION = "v1.0.0"
WHISPER_NAME = "whisper-base"  # the recogniser by default

_MB = 1_000_000


@dataclass(frozen=True)
class CatalogueModel:
    """A model on offer: where its files are on the hub and what it is."""

    name: str  # the folder it is installed in under ``voice_models_dir()``
    kind: Literal["whisper", "piper"]
    repo: str
    files: tuple[str, ...]  # paths in the repository
    size: int  # bytes, all files together
    language: str = ""  # a Piper voice's, as ``en_US``; Whisper hears many
    quality: str = ""
    title: str = ""
    revision: str = "main"

    @property
    def size_text(self) -> str:
        return f"{self.size / _MB:,.0f} MB"

    def describe(self) -> str:
        """One line for a list: the title, language and size."""
        language = f", {self.language}" if self.language else ""
        return f"{self.title or self.name}{language} ({self.size_text})"


def _piper(name: str, title: str, size: int = 63_206_000) -> CatalogueModel:
    """A Piper voice by its name (``en_US-lessac-medium``): the files' paths follow from it."""
    language, speaker, quality = name.split("-")
    folder = f"{language.split('_')[0]}/{language}/{speaker}/{quality}"
    return CatalogueModel(
        name=name,
        kind="piper",
        repo=PIPER_REPO,
        files=(f"{folder}/{name}.onnx", f"{folder}/{name}.onnx.json"),
        size=size,
        language=language,
        quality=quality,
        title=title,
        revision=PIPER_REVISION,
    )


WHISPER_BASE = CatalogueModel(
    name=WHISPER_NAME,
    kind="whisper",
    repo=WHISPER_REPO,
    files=("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"),
    size=147_900_000,
    title="Whisper base (speech to text, many languages)",
)

WHISPER_SMALL = CatalogueModel(
    name="whisper-small",
    kind="whisper",
    repo="Systran/faster-whisper-small",
    files=("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"),
    size=486_000_000,
    title="Whisper small (mishears less, about 3x slower)",
)

CATALOGUE: tuple[CatalogueModel, ...] = (
    WHISPER_BASE,
    WHISPER_SMALL,
    _piper("en_US-lessac-medium", "Lessac, American English", 63_206_179),
    _piper("en_US-amy-medium", "Amy, American English"),
    _piper("en_GB-alan-medium", "Alan, British English"),
    _piper("de_DE-thorsten-medium", "Thorsten, German"),
    _piper("fr_FR-siwis-medium", "Siwis, French"),
    _piper("es_ES-davefx-medium", "Davefx, Spanish"),
)
"""The recognisers first, then the voices; the first voice is the one suggested."""


def catalogue_model(name: str) -> CatalogueModel:
    """The model on offer named ``name``; KeyError names those there are."""
    for model in CATALOGUE:
        if model.name == name:
            return model
    names = ", ".join(m.name for m in CATALOGUE)
    raise KeyError(f"no voice model {name!r} on offer (there are: {names})")


def catalogue_voices() -> list[CatalogueModel]:
    """The Piper voices on offer, in the catalogue's order."""
    return [m for m in CATALOGUE if m.kind == "piper"]


def catalogue_recognisers() -> list[CatalogueModel]:
    """The Whisper models on offer, the default first."""
    return [m for m in CATALOGUE if m.kind == "whisper"]
