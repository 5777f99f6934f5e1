"""Files in ``resources/`` (icons, desktop entry, curated model list)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def resource_path(name: str) -> Path:
    """Path of a resource, in a source checkout or a bundled app."""
    candidates = [Path(__file__).resolve().parents[2] / "resources" / name]
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        candidates.insert(0, Path(bundle) / "resources" / name)
    for path in candidates:
        if path.exists():
            return path
    raise FileNotFoundError(f"resource {name!r} not found")


def curated_models() -> list[dict[str, Any]]:
    """The curated list of good small chat models offered in the picker."""
    data: dict[str, list[dict[str, Any]]] = json.loads(
        resource_path("models.json").read_text(encoding="utf-8")
    )
    return data["models"]


def benchmark_text() -> str:
    """A fixed public-domain English text (Alice's Adventures in Wonderland, chapter I):
    the workload of speed measurements and the quant lab's quality text."""
    return resource_path("text/alice-chapter-1.txt").read_text(encoding="utf-8")
