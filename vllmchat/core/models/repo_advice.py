"""A repository's quants with their fit on a machine (one remote header read)."""

from __future__ import annotations

from collections.abc import Mapping

from vllmchat.core.models.advisor import QuantAdvice, advise, scaled
from vllmchat.core.models.catalog import CatalogError, QuantFile, list_quants, remote_header
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.models.projector import ProjectorInfo, describe_projector


def repo_quant_advice(
    repo: str,
    settings: FitSettings,
    hw: HardwareInfo,
    *,
    token: str | None = None,
    quality: Mapping[str, float] | None = None,
) -> list[tuple[QuantFile, QuantAdvice]]:
    """Quants of ``repo`` (smallest first) and how each fits; the pick is marked.
    ``quality``: measured mean KLD by file name (installed quants the lab compared)."""
    quants = list_quants(repo, token=token)
    if not quants:
        return []
    desc = describe(remote_header(repo, quants[0].filename, token=token))
    read: dict[str, ProjectorInfo | None] = {}
    for q in quants:  # each projector's header once (quants often share one)
        if q.projector is not None and q.projector.filename not in read:
            read[q.projector.filename] = _remote_projector(repo, q.projector.filename, token)
    projectors = {
        q.filename: info
        for q in quants
        if q.projector is not None and (info := read[q.projector.filename]) is not None
    }
    rows = advise(
        [(q.filename, q.size, scaled(desc, q.size)) for q in quants],
        hw,
        settings,
        quality,
        projectors,
    )
    return list(zip(quants, rows, strict=True))


def _remote_projector(repo: str, filename: str, token: str | None) -> ProjectorInfo | None:
    """The facts of a repository's projector from its header (None: it cannot be read,
    and the fit leaves it out; the download checks it)."""
    try:
        return describe_projector(remote_header(repo, filename, token=token), filename)
    except (CatalogError, ValueError):
        return None
