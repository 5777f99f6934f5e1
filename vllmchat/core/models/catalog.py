"""Hugging Face catalog: a repository's GGUF quants, search, and remote headers.

All requests go through ``huggingface_hub`` (so ``HF_ENDPOINT`` and
``HF_TOKEN`` are honoured); a remote header is read with HTTP range requests,
so a quant's fit is known before it is downloaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from vllmchat.core.gguf_header import GGUFHeader, NeedMoreBytes, parse_header
from vllmchat.core.models.advisor import quant_label
from vllmchat.core.models.projector import looks_like_projector, matching_projector

SEARCH_TIMEOUT_S = 15.0
SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$")


class CatalogError(RuntimeError):
    """A hub request failed; the message says why and what to do."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repository, with what is needed to verify it."""

    filename: str
    size: int
    sha256: str | None


@dataclass(frozen=True)
class QuantFile:
    """One quant of a model: a single GGUF or a split set treated as one."""

    repo: str
    label: str
    parts: list[RemoteFile] = field(default_factory=list)
    revision: str = "main"
    # The repository's multimodal projector for this quant (downloaded with it): the
    # model then takes images.
    projector: RemoteFile | None = None

    @property
    def filename(self) -> str:
        """The first part: what llama.cpp opens."""
        return self.parts[0].filename

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1

    @property
    def files(self) -> list[RemoteFile]:
        """What a download fetches: the parts, then the projector."""
        return self.parts + ([self.projector] if self.projector else [])

    @property
    def download_size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class RepoHit:
    """A search result."""

    repo: str
    downloads: int = 0
    likes: int = 0


def _hub_error(exc: Exception, repo: str) -> CatalogError:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return CatalogError(f"{repo} is gated: accept its license on the hub, then set HF_TOKEN.")
    if isinstance(exc, RepositoryNotFoundError):
        return CatalogError(f"{repo} was not found (if it is private, set HF_TOKEN).")
    if isinstance(exc, RevisionNotFoundError):
        return CatalogError(f"{repo} has no such revision.")
    if isinstance(exc, HfHubHTTPError):
        return CatalogError(f"The hub refused the request for {repo}: {exc}".split("\n")[0])
    if _unreachable(exc):
        from huggingface_hub import constants

        return CatalogError(
            f"Cannot reach the hub at {constants.ENDPOINT} ({_first_line(exc)}): check the "
            "network connection, or set HF_ENDPOINT to a mirror."
        )
    return CatalogError(f"The hub's answer could not be read ({type(exc).__name__}: {exc}).")


def _unreachable(exc: Exception) -> bool:
    """Whether the hub could not be reached: an OS error, or the HTTP client's
    ``TransportError`` (httpx's, or that of the fork huggingface_hub brings)."""
    return isinstance(exc, OSError) or any(
        c.__name__ == "TransportError" for c in type(exc).__mro__
    )


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def projectors(files: list[RemoteFile]) -> list[RemoteFile]:
    """A repository's multimodal projectors (``mmproj*.gguf``), by name."""
    return sorted((f for f in files if looks_like_projector(f.filename)), key=lambda f: f.filename)


def group_quants(repo: str, files: list[RemoteFile], revision: str = "main") -> list[QuantFile]:
    """Group a repository's GGUF files into quants, split sets as one, each with the
    projector to download beside it (if the repository has one); sorted by size."""
    singles: list[QuantFile] = []
    splits: dict[str, list[RemoteFile]] = {}
    by_name = {p.filename: p for p in projectors(files)}
    for f in files:
        name = f.filename.rsplit("/", 1)[-1]
        if not name.endswith(".gguf") or f.filename in by_name:
            continue
        m = SPLIT_RE.match(f.filename)
        if m:
            splits.setdefault(m.group("stem"), []).append(f)
        else:
            singles.append(QuantFile(repo, quant_label(name), [f], revision))
    for stem, parts in splits.items():
        parts.sort(key=lambda p: p.filename)
        singles.append(QuantFile(repo, quant_label(stem + ".gguf"), parts, revision))
    if by_name:
        names = list(by_name)
        for i, quant in enumerate(singles):
            projector = matching_projector(quant.filename, names)
            if projector is not None:
                singles[i] = replace(quant, projector=by_name[projector])
    return sorted(singles, key=lambda q: q.size)


def list_quants(repo: str, *, revision: str = "main", token: str | None = None) -> list[QuantFile]:
    """The GGUF quants of a repository, with sizes and LFS hashes."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(token=token).model_info(repo, revision=revision, files_metadata=True)
    except Exception as exc:
        raise _hub_error(exc, repo) from exc
    files = [
        RemoteFile(
            s.rfilename,
            int(s.size or (s.lfs.size if s.lfs else 0)),
            s.lfs.sha256 if s.lfs else None,
        )
        for s in info.siblings or []
    ]
    return group_quants(repo, files, revision)


def search(text: str, *, limit: int = 20, token: str | None = None) -> list[RepoHit]:
    """GGUF repositories matching ``text``, most downloaded first.

    One request, not retried: someone is waiting for the answer, and a hub that cannot
    be reached is said at once (``HfApi.list_models`` retries five times over half a
    minute, printing each retry)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    params: dict[str, str | int] = {
        "search": text,
        "filter": "gguf",
        "sort": "downloads",
        "limit": limit,
    }
    try:
        response = get_session().get(
            f"{constants.ENDPOINT}/api/models",
            params=params,
            headers=build_hf_headers(token=token),
            timeout=SEARCH_TIMEOUT_S,
        )
        hf_raise_for_status(response)
        models = response.json()
        return [
            RepoHit(str(m["id"]), int(m.get("downloads") or 0), int(m.get("likes") or 0))
            for m in models[:limit]
        ]
    except Exception as exc:
        raise _hub_error(exc, f"search {text!r}") from exc


def remote_header(
    repo: str,
    filename: str,
    *,
    revision: str = "main",
    token: str | None = None,
    first_bytes: int = 1 << 20,
) -> GGUFHeader:
    """Parse a remote GGUF's header by fetching only its first bytes."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo, filename, revision=revision)
    have = b""
    want = first_bytes
    for _ in range(12):
        headers = build_hf_headers(token=token)
        headers["Range"] = f"bytes={len(have)}-{want - 1}"
        try:
            response = get_session().get(url, headers=headers, follow_redirects=True)
            hf_raise_for_status(response)
        except Exception as exc:
            raise _hub_error(exc, repo) from exc
        chunk = response.content
        have = (have + chunk) if response.status_code == 206 else chunk
        try:
            return parse_header(have)
        except NeedMoreBytes as more:
            if len(have) < want:  # the file ended
                raise CatalogError(f"{filename} ends inside its header.") from more
            want = max(more.needed, want * 2)
    raise CatalogError(f"The header of {filename} is implausibly large.")
