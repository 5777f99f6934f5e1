"""Draft models a model can use: smaller GGUFs with the same vocabulary.

The vocabulary is compared by its fingerprint, the hash of the token list as
the file stores it (``tokenizer.ggml.tokens``). Installed models are read from
disk; hub models by their header alone, fetched with range requests.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.gguf_header import GGUFHeader, read_header
from vllmchat.core.models.catalog import CatalogError, list_quants, remote_header, search
from vllmchat.core.models.local import LocalModel

log = logging.getLogger(__name__)
TOKENS_KEY = "tokenizer.ggml.tokens"
HUB_REPOS = 6  # repositories whose smallest quant is checked


def vocab_fingerprint(header: GGUFHeader) -> str:
    """The hash of the token list ('' when the file has none)."""
    return header.array_digests.get(TOKENS_KEY, "")


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """The vocabulary fingerprint of a local GGUF."""
    return vocab_fingerprint(read_header(path))


@dataclass(frozen=True)
class DraftCandidate:
    """A model that can draft for another: on disk (``path``) or on the hub."""

    name: str
    size: int
    source: str  # "installed" or "hub"
    path: str = ""
    repo: str = ""
    filename: str = ""

    def describe(self) -> str:
        where = self.path if self.path else f"{self.repo} · {self.filename}"
        return f"{self.name} ({self.size / 2**20:,.0f} MiB, {self.source}): {where}"


def installed_drafts(
    target: str | os.PathLike[str], models: Iterable[LocalModel]
) -> list[DraftCandidate]:
    """Installed models no larger than ``target`` with its vocabulary, smallest first."""
    mine = file_fingerprint(target)
    size = os.path.getsize(target)
    real = os.path.realpath(target)
    found = []
    for m in models:
        if os.path.realpath(m.path) == real or m.size > size:
            continue
        try:
            theirs = file_fingerprint(m.path)
        except (OSError, ValueError) as exc:
            log.info("skipping %s as a draft: %s", m.path, exc)
            continue
        if mine and theirs == mine:
            found.append(DraftCandidate(m.name, m.size, "installed", path=str(m.path)))
    return sorted(found, key=lambda c: c.size)


def _family(header: GGUFHeader) -> str:
    """Words to search the hub with: the model's base name, or its architecture."""
    meta = header.metadata
    base = meta.get("general.basename") or meta.get("general.name") or header.architecture
    return str(base).split("-")[0].strip() or header.architecture


def hub_drafts(
    target: str | os.PathLike[str], *, token: str | None = None, query: str = ""
) -> list[DraftCandidate]:
    """Hub quants no larger than ``target`` whose token list matches (each repository's
    smallest quant is checked by its header), smallest first."""
    header = read_header(target)
    mine, size = vocab_fingerprint(header), os.path.getsize(target)
    if not mine:
        return []
    found: list[DraftCandidate] = []
    for hit in search(query or _family(header), limit=HUB_REPOS * 3, token=token):
        if len(found) >= HUB_REPOS:
            break
        try:
            quants = [q for q in list_quants(hit.repo, token=token) if q.size <= size]
            if not quants:
                continue
            small = min(quants, key=lambda q: q.size)
            theirs = vocab_fingerprint(remote_header(hit.repo, small.filename, token=token))
        except (CatalogError, ValueError) as exc:
            log.info("skipping %s as a draft: %s", hit.repo, exc)
            continue
        if theirs == mine:
            name = Path(small.filename).name
            found.append(DraftCandidate(name, small.size, "hub", repo=hit.repo,
                                        filename=small.filename))  # fmt: skip
    return sorted(found, key=lambda c: c.size)
