"""One chat turn: reuse the cached prefix, prefill the rest, stream sampled tokens."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vllmchat.core.chat_format import TemplateError
from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    Event,
    PrefillProgressEvent,
    StatsEvent,
    TurnStats,
)
from vllmchat.core.engine.images import image_bytes
from vllmchat.core.engine.process.inference.decoding import conversation_key, decode_reply
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.speculative import common_prefix
from vllmchat.core.engine.process.inference.vision import ImageSpan, keep_whole_images
from vllmchat.core.settings import SamplingSettings

Emit = Callable[[Event], None]


@dataclass
class _Images:
    """A turn's image chunks, and what their prefill cost."""

    spans: list[ImageSpan] = field(default_factory=list)
    encoded: int = 0
    tokens: int = 0


def _pieces(
    prompt: Sequence[int], start: int, spans: Sequence[ImageSpan], step: int
) -> list[tuple[int, int, ImageSpan | None]]:
    """The prompt from ``start`` as batches of text tokens and whole image chunks."""
    out: list[tuple[int, int, ImageSpan | None]] = []
    pos = start
    for span in [s for s in spans if s.start >= start] + [None]:
        end = span.start if span is not None else len(prompt)
        out += [(lo, min(lo + step, end), None) for lo in range(pos, end, step)]
        if span is not None:
            out.append((span.start, span.end, span))
            pos = span.end
    return out


def _prefill(
    rt: LlamaRuntime,
    prompt: Sequence[int],
    start: int,
    images: _Images,
    should_stop: Callable[[], bool],
    emit: Emit,
) -> bool:
    """Evaluate the prompt from ``start``: text in batches, each image chunk encoded and
    decoded whole; False if stopped."""
    total = len(prompt) - start
    step = rt.settings.n_batch
    rt.set_abort(should_stop)
    try:
        for lo, hi, span in _pieces(prompt, start, images.spans, step):
            rt.step_beside()  # the API slots' step: no logits are needed before this decode
            if should_stop():
                return False
            try:
                if span is None:
                    rt.decode(prompt[lo:hi])
                else:
                    assert rt.vision is not None
                    rt.vision.evaluate(span, step)
                    images.encoded += 1
                    images.tokens += hi - lo
            except EngineError as exc:
                if should_stop() and exc.message == "aborted":
                    return False
                raise
            if total > step:
                emit(PrefillProgressEvent(hi - start, total))
    finally:
        rt.set_abort(None)
    return True


def rendered_prompt(
    rt: LlamaRuntime,
    messages: Sequence[Mapping[str, str]],
    sampling: SamplingSettings,
    options: ChatOptions,
) -> tuple[list[int], list[bytes]] | ErrorEvent:
    """The prompt's tokens and the images' bytes, or why the turn cannot be answered."""
    if not messages:
        return ErrorEvent(ErrorKind.BAD_REQUEST, "There is no message to answer.")
    try:
        data = [image_bytes(i) for i in options.images]
        tool_list = json.loads(options.tools) if options.tools else None
        if options.raw:
            prompt = rt.raw_prompt(messages[-1]["content"])
        else:
            prompt = rt.render(messages, thinking=sampling.thinking, images=data, tools=tool_list)
    except (TemplateError, ValueError) as exc:
        return ErrorEvent(ErrorKind.BAD_REQUEST, str(exc))
    except EngineError as exc:
        return ErrorEvent(exc.kind, exc.message)
    if len(prompt) >= rt.n_ctx:
        return ErrorEvent(
            ErrorKind.PROMPT_TOO_LONG,
            f"The prompt is {len(prompt):,} tokens; the context holds {rt.n_ctx:,}.",
        )
    return prompt, data


def run_turn(
    rt: LlamaRuntime,
    messages: Sequence[Mapping[str, str]],
    sampling: SamplingSettings,
    *,
    should_stop: Callable[[], bool],
    emit: Emit,
    options: ChatOptions = PLAIN,
) -> None:
    """Answer the last message, streaming events through ``emit``; ``options.images`` go
    where the messages hold ``MEDIA_MARKER``, in order.

    ``options.tools`` (OpenAI's list, JSON) goes to the template; ``json_schema`` or
    ``grammar`` (GBNF) constrains the reply with llama.cpp's grammar (without speculation).
    """
    try:
        t0 = time.perf_counter()
        rendered = rendered_prompt(rt, messages, sampling, options)
        if isinstance(rendered, ErrorEvent):
            emit(rendered)
            return
        prompt, data = rendered
        pictures = _Images(rt.vision.spans(prompt) if rt.vision is not None and data else [])
        cached = rt.kv_tokens
        known = cached + ([rt.pending] if rt.pending is not None else [])
        shared = min(common_prefix(cached, prompt), len(prompt) - 1)
        reused = rt.truncate(keep_whole_images(shared, pictures.spans))
        rt.pending = None
        new_tokens = len(prompt) - min(common_prefix(known, prompt), len(prompt) - 1)
        base: dict[str, Any] = dict(
            prompt_tokens=len(prompt),
            tokens_reused=reused,
            tokens_prefilled=len(prompt) - reused,
            tokens_new=new_tokens,
            n_ctx=rt.n_ctx,
        )
        try:
            finished = _prefill(rt, prompt, reused, pictures, should_stop, emit)
            base.update(images_encoded=pictures.encoded, image_tokens=pictures.tokens)
            if not finished:
                stats = TurnStats(
                    **base,
                    prefill_s=time.perf_counter() - t0,
                    stop_reason="stopped",
                    kv_tokens=rt.llm.n_tokens,
                )
                emit(StatsEvent(stats))
                emit(DoneEvent("", "stopped", stats))
                return
        except EngineError as exc:
            emit(ErrorEvent(exc.kind, exc.message))
            return
        t_prefilled = time.perf_counter()
        if options.constrained:
            sampling = replace(sampling, speculation="off")
        decode_reply(
            rt,
            sampling,
            should_stop,
            emit,
            base,
            (t0, t_prefilled),
            conversation_key(messages),
            options=options,
        )
        settle_pending(rt)
    finally:
        if rt.vision is not None:
            rt.vision.end_turn()  # the image chunks are freed; their ids stay known


def settle_pending(rt: LlamaRuntime) -> None:
    """Put the last sampled token into the KV cache while the user reads the reply,
    so the next turn prefills only what is new."""
    token, rt.pending = rt.pending, None
    if token is not None and rt.llm.n_tokens < rt.n_ctx - 1:
        try:
            rt.decode([token])
        except EngineError:
            rt.pending = token
