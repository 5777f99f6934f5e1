"""What an attachment is: a document's text with its page and section map, its chunks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["document", "image"]
Mode = Literal["whole", "retrieval", "image"]
"""How an attachment reaches the model: the whole text in its message, the chunks that
answer each question, or an image the model encodes."""


def span_label(page: int | None, heading: str, lines: tuple[int, int] | None = None) -> str:
    """Where a part of a document is, in words: ``p. 3 · Results`` or ``lines 10–42``."""
    parts = []
    if page is not None:
        parts.append(f"p. {page}")
    if heading:
        parts.append(heading)
    if page is None and lines is not None:
        parts.append(f"lines {lines[0]}–{lines[1]}")
    return " · ".join(parts)


@dataclass(frozen=True)
class Section:
    """A span of a document's text: one page of a PDF, or the part under one heading."""

    start: int
    end: int
    page: int | None = None  # 1-based, for formats with pages
    heading: str = ""  # the heading path, "Install > Linux"


@dataclass(frozen=True)
class ExtractedDocument:
    """A document read from a file: its text, where its pages and sections are, its hash."""

    name: str
    sha256: str
    mime: str
    size: int  # bytes of the file
    text: str
    sections: tuple[Section, ...]
    pages: int = 0  # of a paged format (0: it has none)
    notice: str = ""  # what the user should know of how it was read (an encoding assumed)

    def section_at(self, offset: int) -> Section | None:
        """The section holding the character at ``offset``."""
        for section in self.sections:
            if section.start <= offset < section.end:
                return section
        return None


@dataclass(frozen=True)
class Chunk:
    """A part of a document of a few hundred tokens, inside one page or section."""

    seq: int
    start: int  # character offsets in the document's text
    end: int
    text: str
    page: int | None = None
    section: str = ""
    lines: tuple[int, int] = (0, 0)  # first and last line (1-based)

    @property
    def label(self) -> str:
        return span_label(self.page, self.section, self.lines)


@dataclass(frozen=True)
class ChunkHit:
    """A chunk retrieved for a question, with the document it comes from."""

    chunk_id: int
    attachment_id: int
    name: str
    seq: int
    text: str
    page: int | None
    section: str
    lines: tuple[int, int]
    score: float = 0.0  # bm25: lower is better

    @property
    def label(self) -> str:
        return span_label(self.page, self.section, self.lines)


@dataclass(frozen=True)
class Attachment:
    """An attachment as the conversation store keeps it (``message_id`` None: it waits
    for the next user message)."""

    id: int
    conversation_id: int
    message_id: int | None
    kind: Kind
    name: str
    sha256: str
    mime: str
    size: int
    text: str = ""
    sections: tuple[Section, ...] = ()
    pages: int = 0
    tokens: int = 0  # of the text, by the model it was attached for
    mode: Mode = "whole"
    created: float = 0.0
    data: bytes | None = None  # an image's bytes (documents keep their text only)
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. an image's size


def sections_to_json(sections: tuple[Section, ...]) -> str:
    return json.dumps([[s.start, s.end, s.page, s.heading] for s in sections])


def sections_from_json(text: str) -> tuple[Section, ...]:
    return tuple(Section(int(a), int(b), p, str(h)) for a, b, p, h in json.loads(text or "[]"))
