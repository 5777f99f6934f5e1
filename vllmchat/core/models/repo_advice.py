"""A repository's quants with their fit on a machine (one remote header read)."""

from __future__ import annotations

from collections.abc import Mapping

from vllmchat.core.models.advisor import QuantAdvice, advise, scaled
from vllmchat.core.models.catalog import QuantFile, list_quants, remote_header
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import FitSettings


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
    rows = advise(
        [(q.filename, q.size, scaled(desc, q.size)) for q in quants], hw, settings, quality
    )
    return list(zip(quants, rows, strict=True))
