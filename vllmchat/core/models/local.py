"""GGUF models already on disk: the app's folder, the Hugging Face cache, user folders."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.models.advisor import quant_label
from vllmchat.core.models.catalog import SPLIT_RE
from vllmchat.core.models.projector import looks_like_projector, projector_beside


@dataclass(frozen=True)
class LocalModel:
    """A model file on disk (the first part of a split set)."""

    path: Path
    size: int
    label: str
    source: str  # "demo", "app", "hf-cache" or "folder"
    parts: int = 1
    projector: str = ""  # the projector beside it made for its width: it takes images

    @property
    def vision(self) -> bool:
        return bool(self.projector)

    @property
    def name(self) -> str:
        return self.path.name


def hf_cache_dir() -> Path:
    """Hugging Face's hub cache, as huggingface_hub resolves it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"
    )
    return Path(home) / "hub"


def _scan(folder: Path, source: str) -> Iterable[LocalModel]:
    if not folder.is_dir():
        return
    paths = sorted(folder.rglob("*.gguf"))
    with_projector = {p.parent for p in paths if looks_like_projector(p.name)}
    for path in paths:
        if ".partial" in path.parts or looks_like_projector(path.name):
            continue
        m = SPLIT_RE.match(path.name)
        if m and m.group("part") != "00001":
            continue
        parts = [path]
        if m:
            total = int(m.group("total"))
            parts = [
                path.with_name(f"{m.group('stem')}-{i:05d}-of-{total:05d}.gguf")
                for i in range(1, total + 1)
            ]
            if not all(p.exists() for p in parts):
                continue  # an incomplete split set is not listed
        try:
            size = sum(p.stat().st_size for p in parts)
        except OSError:
            continue
        projector = projector_beside(path) if path.parent in with_projector else None
        yield LocalModel(path, size, quant_label(path.name), source, len(parts), projector or "")


def discover(
    extra_folders: Iterable[str | Path] = (), *, include_demo: bool = True
) -> list[LocalModel]:
    """Every model found, without duplicates (the same file through a symlink counts once)."""
    from vllmchat.core.paths import cache_dir, models_dir

    found: dict[str, LocalModel] = {}
    sources = [(models_dir(), "app"), (hf_cache_dir(), "hf-cache")]
    if include_demo:
        sources.insert(0, (cache_dir() / "models", "demo"))
    sources += [(Path(f).expanduser(), "folder") for f in extra_folders]
    for folder, source in sources:
        for model in _scan(folder, source):
            key = os.path.realpath(model.path)
            found.setdefault(key, model)
    return list(found.values())
