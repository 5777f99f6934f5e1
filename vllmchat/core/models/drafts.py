"""Draft models a model can use: smaller GGUFs with the same vocabulary.

The vocabulary is compared by its fingerprint, the hash of the token list as
the file stores it (``tokenizer.ggml.tokens``): the engine's own rule, so a model
listed here is one the engine takes. The token count and the tokenizer's name
say why another one cannot draft. Installed models are read from disk; the
catalog's and the hub's by their header alone, fetched with range requests.
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
from vllmchat.core.resources import curated_models

log = logging.getLogger(__name__)
TOKENS_KEY = "tokenizer.ggml.tokens"
HUB_REPOS = 6  # repositories whose smallest quant is checked
MIB = 2**20


def vocab_fingerprint(header: GGUFHeader) -> str:
    """The hash of the token list ('' when the file has none)."""
    return header.array_digests.get(TOKENS_KEY, "")


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """The vocabulary fingerprint of a local GGUF."""
    return vocab_fingerprint(read_header(path))


@dataclass(frozen=True)
class Vocabulary:
    """What a header says of its vocabulary: enough to tell why two differ."""

    tokens: int
    tokenizer: str  # tokenizer.ggml.model: "gpt2" (BPE), "llama" (SentencePiece), …
    fingerprint: str

    @classmethod
    def of(cls, header: GGUFHeader) -> Vocabulary:
        model = header.metadata.get("tokenizer.ggml.model")
        return cls(
            header.array_lengths.get(TOKENS_KEY, 0), str(model or "?"), vocab_fingerprint(header)
        )


def draft_refusal(draft: Vocabulary, target: Vocabulary) -> str:
    """Why a model of vocabulary ``draft`` cannot draft for ``target`` ('' when it can)."""
    if not target.fingerprint:
        return "the model's header has no token list"
    if not draft.fingerprint:
        return "its header has no token list"
    if draft.fingerprint == target.fingerprint:
        return ""
    if draft.tokens == target.tokens and draft.tokenizer == target.tokenizer:
        return f"other tokens in a vocabulary of the same size ({draft.tokens:,})"
    counts = f"{draft.tokens:,} tokens against the model's {target.tokens:,}"
    if draft.tokenizer != target.tokenizer:
        counts += f"; tokenizer {draft.tokenizer} against {target.tokenizer}"
    return f"another vocabulary ({counts})"


@dataclass(frozen=True)
class DraftCandidate:
    """A model that can draft for another: on disk (``path``) or in the catalog or on
    the hub; ``reason`` says why it cannot ('' when it can)."""

    name: str
    size: int
    source: str  # "installed", "catalog" or "hub"
    path: str = ""
    repo: str = ""
    filename: str = ""
    reason: str = ""

    @property
    def usable(self) -> bool:
        return not self.reason

    def describe(self) -> str:
        where = self.path if self.path else f"{self.repo} · {self.filename}"
        return f"{self.name} ({self.size / MIB:,.0f} MiB, {self.source}): {where}"


def installed_draft_options(
    target: str | os.PathLike[str], models: Iterable[LocalModel]
) -> list[DraftCandidate]:
    """Every installed model but ``target`` itself: those that can draft for it first
    (smallest first), then the others with the reason (by name)."""
    mine = Vocabulary.of(read_header(target))
    size = os.path.getsize(target)
    real = os.path.realpath(target)
    found = []
    for m in models:
        if os.path.realpath(m.path) == real:
            continue
        if m.size > size:
            reason = f"larger than the model ({size / MIB:,.0f} MiB)"
        else:
            try:
                reason = draft_refusal(Vocabulary.of(read_header(m.path)), mine)
            except (OSError, ValueError) as exc:
                reason = f"unreadable ({exc})"
        found.append(DraftCandidate(m.name, m.size, "installed", path=str(m.path), reason=reason))
    return sorted(found, key=lambda c: (not c.usable, c.size if c.usable else 0, c.name))


def file_refusal(draft: str | os.PathLike[str], target: str | os.PathLike[str]) -> str:
    """Why the file ``draft`` cannot draft for ``target`` ('' when it can), as the
    engine would refuse it."""
    try:
        return draft_refusal(Vocabulary.of(read_header(draft)), Vocabulary.of(read_header(target)))
    except (OSError, ValueError) as exc:
        return f"unreadable ({exc})"


def installed_drafts(
    target: str | os.PathLike[str], models: Iterable[LocalModel]
) -> list[DraftCandidate]:
    """Installed models no larger than ``target`` with its vocabulary, smallest first."""
    return [c for c in installed_draft_options(target, models) if c.usable]


def _family(header: GGUFHeader) -> str:
    """Words to search the hub with: the model's base name, or its architecture."""
    meta = header.metadata
    base = meta.get("general.basename") or meta.get("general.name") or header.architecture
    return str(base).split("-")[0].strip() or header.architecture


def catalog_repos() -> list[str]:
    """The download catalog's repositories (the curated list, less the built-in model)."""
    return [str(e["repo"]) for e in curated_models() if not e.get("builtin")]


def hub_drafts(
    target: str | os.PathLike[str],
    *,
    token: str | None = None,
    query: str = "",
    catalog: Iterable[str] | None = None,
) -> list[DraftCandidate]:
    """The catalog's and the hub's quants no larger than ``target`` whose token list
    matches (each repository's smallest quant is checked by its header; the catalog's
    repositories first, then up to ``HUB_REPOS`` found by a search), smallest first."""
    header = read_header(target)
    mine, size = vocab_fingerprint(header), os.path.getsize(target)
    if not mine:
        return []
    known = list(catalog_repos() if catalog is None else catalog)
    searched = [h.repo for h in search(query or _family(header), limit=HUB_REPOS * 3, token=token)]
    found: list[DraftCandidate] = []
    hub_found = 0
    for repo in dict.fromkeys(known + searched):
        source = "catalog" if repo in known else "hub"
        if source == "hub" and hub_found >= HUB_REPOS:
            break
        try:
            quants = [q for q in list_quants(repo, token=token) if q.size <= size]
            if not quants:
                continue
            small = min(quants, key=lambda q: q.size)
            theirs = vocab_fingerprint(remote_header(repo, small.filename, token=token))
        except (CatalogError, ValueError) as exc:
            log.info("skipping %s as a draft: %s", repo, exc)
            continue
        if theirs == mine:
            hub_found += source == "hub"
            found.append(
                DraftCandidate(
                    Path(small.filename).name,
                    small.size,
                    source,
                    repo=repo,
                    filename=small.filename,
                )
            )
    return sorted(found, key=lambda c: c.size)
