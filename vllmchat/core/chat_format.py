"""Render chat messages into token ids, keeping message text as text.

The template (the GGUF's own, or a built-in one) is rendered with each message
content replaced by a placeholder. The template's own markup may contain
control tokens; message contents never do: they are tokenized with special
tokens off, so a user typing ``<end_of_turn>`` gets plain text tokens.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

_PLACEHOLDER = "\ue000{}\ue001"
_PLACEHOLDER_RE = re.compile("\ue000(\\d+)\ue001")


class Vocab(Protocol):
    """What the prompt builder needs from a tokenizer."""

    def tokenize(self, text: str, *, special: bool) -> list[int]: ...

    def is_special(self, token: int) -> bool: ...

    def token_text(self, token: int) -> str: ...


@dataclass(frozen=True)
class Segment:
    """A piece of rendered prompt: template markup, or one message's content."""

    text: str
    message_index: int | None = None  # None for markup

    @property
    def is_markup(self) -> bool:
        return self.message_index is None


class TemplateError(ValueError):
    """The chat template could not be rendered."""


def _raise(message: str) -> None:
    raise TemplateError(message)


_ENV = ImmutableSandboxedEnvironment(
    loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True
)
_ENV.globals["raise_exception"] = _raise


@functools.lru_cache(maxsize=16)
def _compiled(template: str) -> jinja2.Template:
    return _ENV.from_string(template)


def render_segments(
    template: str,
    messages: Sequence[Mapping[str, str]],
    *,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool = True,
    enable_thinking: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> list[Segment]:
    """Render messages through a Jinja chat template into markup/content segments.

    ``tools`` (OpenAI's list) is given to templates with a tool format, as llama.cpp's
    ``--jinja`` does; a message's other keys (a tool result's ``tool_call_id``,
    ``name``) reach the template as they are.
    """
    stand_ins = [{**m, "content": _PLACEHOLDER.format(i)} for i, m in enumerate(messages)]
    extra: dict[str, Any] = {"tools": list(tools)} if tools else {}
    try:
        rendered = _compiled(template).render(
            messages=stand_ins,
            bos_token=bos_token,
            eos_token=eos_token,
            add_generation_prompt=add_generation_prompt,
            enable_thinking=enable_thinking,
            **extra,
        )
    except jinja2.TemplateError as exc:
        raise TemplateError(f"chat template failed: {exc}") from exc
    segments: list[Segment] = []
    pos = 0
    for match in _PLACEHOLDER_RE.finditer(rendered):
        if match.start() > pos:
            segments.append(Segment(rendered[pos : match.start()]))
        index = int(match.group(1))
        segments.append(Segment(messages[index]["content"], index))
        pos = match.end()
    if pos < len(rendered):
        segments.append(Segment(rendered[pos:]))
    return segments


_MARKUP_CACHE_SIZE = 1024


def _split_markup_cached(
    text: str, vocab: Vocab, cache: dict[str, list[str | int]]
) -> list[str | int]:
    """``_split_markup``, remembered per markup text: a chat repeats the same few pieces."""
    parts = cache.get(text)
    if parts is None:
        parts = _split_markup(text, vocab)
        if len(cache) >= _MARKUP_CACHE_SIZE:
            cache.clear()
        cache[text] = parts
    return parts


def _split_markup(text: str, vocab: Vocab) -> list[str | int]:
    """Split template markup into plain text and control-token ids."""
    parts: list[str | int] = []
    pos = 0
    for token in vocab.tokenize(text, special=True):
        if not vocab.is_special(token):
            continue
        piece = vocab.token_text(token)
        at = text.find(piece, pos)
        if at < 0 or not piece:
            continue
        if at > pos:
            parts.append(text[pos:at])
        parts.append(token)
        pos = at + len(piece)
    if pos < len(text):
        parts.append(text[pos:])
    return parts


def prompt_tokens(
    segments: Sequence[Segment],
    vocab: Vocab,
    *,
    roles: Sequence[str],
    known_replies: Mapping[str, Sequence[int]] | None = None,
    markup_cache: dict[str, list[str | int]] | None = None,
    media: tuple[str, Callable[[], list[int]]] | None = None,
) -> list[int]:
    """Token ids for rendered segments.

    Plain markup text and message text are joined into runs between control
    tokens and tokenized with special tokens off. An assistant message whose
    text this engine generated keeps the exact ids it was sampled as, so the
    KV cache of a reply is reused on the next turn. ``media``: a marker and a
    function giving the ids of the next image; each marker in a message's text is
    replaced by them, in order.
    """
    known_replies = known_replies or {}
    ids: list[int] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            text = "".join(run)
            run.clear()
            if text:
                ids.extend(vocab.tokenize(text, special=False))

    for seg in segments:
        if seg.is_markup:
            split = (
                _split_markup(seg.text, vocab)
                if markup_cache is None
                else _split_markup_cached(seg.text, vocab, markup_cache)
            )
            for part in split:
                if isinstance(part, int):
                    flush()
                    ids.append(part)
                else:
                    run.append(part)
            continue
        assert seg.message_index is not None
        reply_ids = known_replies.get(seg.text) if roles[seg.message_index] == "assistant" else None
        if reply_ids is not None:
            flush()
            ids.extend(reply_ids)
        elif media is not None and media[0] in seg.text:
            marker, next_image = media
            pieces = seg.text.split(marker)
            for i, piece in enumerate(pieces):
                if i:
                    flush()
                    ids.extend(next_image())
                run.append(piece)
        else:
            run.append(seg.text)
    flush()
    return ids
