"""Tools the user always allows: ``mcp-approved.json`` next to ``mcp.json``, a JSON list
of tool names as the model sees them (``server_tool``). Both front ends read and write it
here; a revoked tool asks before each call again."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path


def approved_path(config_file: Path) -> Path:
    return config_file.with_name("mcp-approved.json")


def load_approved(config_file: Path) -> list[str]:
    """The tools the user always allows (none where the file is missing or unreadable)."""
    try:
        names = json.loads(approved_path(config_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def save_approved(config_file: Path, names: Iterable[str]) -> str:
    """Write the tools always allowed; "" when written, else why not (kept for the session)."""
    try:
        approved_path(config_file).write_text(json.dumps(sorted(set(names))), encoding="utf-8")
    except OSError as exc:
        return f"{approved_path(config_file)} could not be written ({exc.strerror or exc})"
    return ""
