"""How attachments are put into a prompt, and whether a document goes in whole.

A document that fits goes whole into the message it was attached to, so its tokens
are prefilled once and stay in the KV cache (and in the conversation's saved KV
state). A larger one is answered from passages: each question gets the chunks that
match it, with their page or section, in front of the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllmchat.core.attachments.errors import NoRoom
from vllmchat.core.attachments.model import Attachment, ChunkHit, Mode

QUESTION_ROOM = 128  # tokens kept free for the question asked with a document
MIN_PASSAGES = 3  # fewer, and retrieval cannot answer much
MAX_PASSAGES = 6
PASSAGES_HEADER = "Passages from the attached documents, each with where it is:"


def document_block(att: Attachment) -> str:
    """A whole document as it goes into its message; each page is marked."""
    pages = f' pages="{att.pages}"' if att.pages else ""
    body = att.text
    if att.pages:
        parts = []
        for section in att.sections:
            parts.append(f"[page {section.page}]\n{att.text[section.start : section.end]}")
        body = "".join(parts)
    return f'<document name="{att.name}"{pages}>\n{body.strip()}\n</document>'


def with_documents(text: str, documents: Sequence[Attachment]) -> str:
    """A user message's text after the whole documents attached to it."""
    blocks = [document_block(d) for d in documents if d.mode == "whole"]
    return "\n\n".join([*blocks, text] if text.strip() else blocks)


def with_passages(text: str, hits: Sequence[ChunkHit]) -> str:
    """A question after the passages retrieved for it, numbered, each with its place."""
    if not hits:
        return text
    passages = [
        f"[{n}] {h.name}, {h.label or 'part ' + str(h.seq + 1)}:\n{h.text}"
        for n, h in enumerate(hits, 1)
    ]
    return "\n\n".join([PASSAGES_HEADER, *passages, text])


@dataclass(frozen=True)
class Fit:
    """How a document reaches the model, and the words that tell the user."""

    mode: Mode
    tokens: int
    share: float  # of the context, when whole
    message: str


def fit_document(
    name: str,
    tokens: int,
    *,
    prompt_tokens: int,
    budget: int,
    n_ctx: int,
    chunk_tokens: int,
    n_ctx_train: int = 0,
    notice: str = "",
) -> Fit:
    """``whole`` when the document fits the prompt budget beside the conversation so far
    (``prompt_tokens``) and a question; else ``retrieval`` when the budget holds a few
    passages; else ``NoRoom`` saying what context would do, or, when the model was
    trained for less than that (``n_ctx_train``), that it is too small for retrieval.
    A ``notice`` on how the document was read (an encoding assumed) ends the message."""
    fit = _fit(name, tokens, prompt_tokens, budget, n_ctx, chunk_tokens, n_ctx_train)
    if not notice:
        return fit
    return Fit(fit.mode, fit.tokens, fit.share, f"{fit.message} {notice}")


def _fit(
    name: str,
    tokens: int,
    prompt_tokens: int,
    budget: int,
    n_ctx: int,
    chunk_tokens: int,
    n_ctx_train: int,
) -> Fit:
    if prompt_tokens + tokens + QUESTION_ROOM <= budget:
        share = tokens / n_ctx
        return Fit(
            "whole",
            tokens,
            share,
            f"{name} ({tokens:,} tokens, {share:.0%} of the "
            "context) goes whole into your next message; follow-ups reuse it.",
        )
    need = MIN_PASSAGES * chunk_tokens + 2 * QUESTION_ROOM
    if budget >= need:
        return Fit(
            "retrieval",
            tokens,
            0.0,
            (
                f"{name} ({tokens:,} tokens) is more than the context leaves "
                f"({max(0, budget - prompt_tokens):,}): each question gets the passages that match "
                "it, with their page or section."
            ),
        )
    said = (
        f"{name} is {tokens:,} tokens, more than the context holds ({n_ctx:,}), and the "
        f"context is too small to answer from parts of it ({MIN_PASSAGES} passages need "
        f"about {need:,} tokens besides the reply)."
    )
    size = _suggest(n_ctx, need + (n_ctx - budget))
    if 0 < n_ctx_train < size:
        raise NoRoom(
            f"{said} This model was trained for at most {n_ctx_train:,} tokens of context, "
            f"too few for passages to help: use a model with a longer context (n_ctx "
            f"{size:,} or more), or attach a shorter part."
        )
    raise NoRoom(
        f"{said} Load the model with a larger context (n_ctx {size:,} or more), "
        "or attach a shorter part."
    )


def passages_for(room: int, chunk_tokens: int) -> int:
    """How many passages of about ``chunk_tokens`` fit in ``room`` tokens (at most
    ``MAX_PASSAGES``)."""
    return max(0, min(MAX_PASSAGES, room // max(1, int(chunk_tokens * 1.2))))


def _suggest(n_ctx: int, need: int) -> int:
    size = max(n_ctx * 2, 1024)
    while size < need:
        size *= 2
    return size
