"""The models the API offers: the GGUF files found on disk, by a name clients can send."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.local import discover


@dataclass(frozen=True)
class OfferedModel:
    """A model on disk: its id (the file's name without ``.gguf``) and what it holds."""

    id: str
    path: str
    size: int
    context_length: int  # tokens it was trained for (0: unknown)
    vision: bool
    created: int  # the file's modification time (seconds)


def model_id(path: str | Path) -> str:
    name = Path(path).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def _context_length(path: Path) -> int:
    try:
        value = read_header(path).arch_value("context_length", 0)
        return int(value or 0)
    except (OSError, ValueError, TypeError):
        return 0


def offered_models(folders: Iterable[str | Path], loaded: str = "") -> list[OfferedModel]:
    """Every model on disk (the loaded one too, wherever it lies), first the loaded one."""
    found = discover(list(folders))
    paths = {os.path.realpath(m.path) for m in found}
    models = [
        OfferedModel(
            model_id(m.path),
            str(m.path),
            m.size,
            _context_length(m.path),
            m.vision,
            int(m.path.stat().st_mtime) if m.path.exists() else 0,
        )
        for m in found
    ]
    if loaded and os.path.realpath(loaded) not in paths and os.path.isfile(loaded):
        p = Path(loaded)
        models.append(
            OfferedModel(
                model_id(p),
                str(p),
                p.stat().st_size,
                _context_length(p),
                False,
                int(p.stat().st_mtime),
            )
        )
    real = os.path.realpath(loaded) if loaded else ""
    return sorted(models, key=lambda m: (os.path.realpath(m.path) != real, m.id.lower()))


def find_model(models: Sequence[OfferedModel], name: str) -> OfferedModel | None:
    """The model a request names: by id, file name or path (case-insensitive ids)."""
    for model in models:
        if name in (model.id, model.path, Path(model.path).name):
            return model
    lowered = [m for m in models if m.id.lower() == name.lower()]
    return lowered[0] if len(lowered) == 1 else None
