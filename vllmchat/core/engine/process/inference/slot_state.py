"""What an API slot holds: its sequence's tokens and key, and the turn it runs."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SlotTurn:
    """A turn running in a slot."""

    rid: int
    keep_as: str
    named: bool  # the client named its state
    prompt: list[int]
    at: int  # prompt tokens in the KV cache
    sampler: Any
    max_new: int
    ignore_eos: bool
    limit: str  # why the reply ends at ``max_new``: "max_tokens" or "context_full"
    base: dict[str, Any]
    t0: float
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    ids: list[int] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    pending: int | None = None  # sampled and streamed, not yet in the KV cache
    place_s: float = 0.0  # rendered and its state made live
    t_prefilled: float = 0.0
    t_first: float = 0.0
    t_last: float = 0.0


@dataclass
class Slot:
    """One sequence: whose state it holds (``key``), its tokens, the turn it runs."""

    seq: int
    key: str = ""
    tokens: list[int] = field(default_factory=list)
    turn: SlotTurn | None = None
    used: float = 0.0
