"""Chunks of a few hundred tokens, each inside one page or section, for retrieval.

A chunk ends at a paragraph where it can, else at a sentence, else at a space; it
never runs across a page or a heading, so its page and section say where it is.
"""

from __future__ import annotations

import re

from vllmchat.core.attachments.model import Chunk, ExtractedDocument

TARGET_TOKENS = 300
CHARS_PER_TOKEN = 4.0  # English prose; measured on the document where a model is loaded
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+")


def chunk_document(
    doc: ExtractedDocument,
    *,
    target_tokens: int = TARGET_TOKENS,
    chars_per_token: float = CHARS_PER_TOKEN,
) -> list[Chunk]:
    """The document's chunks in order (``seq`` from 0)."""
    limit = max(200, int(target_tokens * chars_per_token))
    chunks: list[Chunk] = []
    line_starts = _line_starts(doc.text)
    for section in doc.sections:
        for start, end in _spans(doc.text, section.start, section.end, limit):
            body = doc.text[start:end]
            lead = len(body) - len(body.lstrip())
            start, body = start + lead, body.strip()
            if not body:
                continue
            lines = (_line_of(line_starts, start), _line_of(line_starts, start + len(body) - 1))
            end = start + len(body)
            chunks.append(
                Chunk(len(chunks), start, end, body, section.page, section.heading, lines)
            )
    return chunks


def _spans(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Spans of at most about ``limit`` characters covering ``text[start:end]``."""
    spans: list[tuple[int, int]] = []
    at = start
    while end - at > limit:
        cut = _cut(text, at, min(end, at + limit))
        spans.append((at, cut))
        at = cut
    if end > at:
        spans.append((at, end))
    return spans


def _cut(text: str, start: int, stop: int) -> int:
    """Where to end a chunk begun at ``start`` before ``stop``: the last paragraph end
    in its second half, else the last sentence end, else the last space."""
    half = start + (stop - start) // 2
    window = text[half:stop]
    for pattern in (_PARAGRAPH, _SENTENCE):
        ends = [m.end() for m in pattern.finditer(window)]
        if ends:
            return half + ends[-1]
    space = window.rfind(" ")
    return half + space + 1 if space >= 0 else stop


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def _line_of(starts: list[int], offset: int) -> int:
    """The 1-based line holding ``offset``."""
    lo, hi = 0, len(starts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid
    return lo + 1
