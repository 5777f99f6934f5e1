"""The values the conversation store hands out: conversations, messages, summaries."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Message:
    """One message; ``parent_id`` links the branch it belongs to."""

    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    created: float
    tokens: int = 0
    token_ids: tuple[int, ...] = ()
    model: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    partial: bool = False
    pinned: bool = False  # kept verbatim in every prompt, never summarized
    thinking: str = ""  # a reasoning model's thinking before ``content`` (shown folded)


@dataclass(frozen=True)
class Summary:
    """A summary of the messages from ``first_message_id`` to ``last_message_id``."""

    id: int
    conversation_id: int
    content: str
    first_message_id: int
    last_message_id: int
    created: float
    tokens: int = 0
    edited: bool = False


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    system_prompt: str
    created: float
    updated: float
    leaf_id: int | None


ROOT = 0  # parent_id meaning "no parent" (a new first message)


def title_from(text: str, words: int = 7) -> str:
    """A title from the first words of a message."""
    parts = text.split()
    title = " ".join(parts[:words])
    return (title[:60] + ("…" if len(parts) > words or len(title) > 60 else "")) or "New chat"


def message_from_row(row: sqlite3.Row) -> Message:
    return Message(
        row["id"],
        row["conversation_id"],
        row["parent_id"],
        row["role"],
        row["content"],
        row["created"],
        row["tokens"],
        tuple(json.loads(row["token_ids"])) if row["token_ids"] else (),
        row["model"],
        json.loads(row["settings"]),
        json.loads(row["stats"]),
        bool(row["partial"]),
        bool(row["pinned"]),
        row["thinking"],
    )


def summary_from_row(row: sqlite3.Row) -> Summary:
    return Summary(
        row["id"],
        row["conversation_id"],
        row["content"],
        row["first_message_id"],
        row["last_message_id"],
        row["created"],
        row["tokens"],
        bool(row["edited"]),
    )


def id_batches(ids: Iterable[int], size: int = 500) -> Iterator[tuple[list[int], str]]:
    """``ids`` in batches SQLite's parameter limit takes, each with its ``?,?,…`` marks."""
    every = list(ids)
    for start in range(0, len(every), size):
        part = every[start : start + size]
        yield part, ",".join("?" * len(part))
