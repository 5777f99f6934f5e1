"""One chat turn: reuse the cached prefix, prefill the rest, stream sampled tokens."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from vllmchat.core.chat_format import TemplateError
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
from vllmchat.core.engine.process.inference.decoding import conversation_key, decode_reply
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.speculative import common_prefix
from vllmchat.core.settings import SamplingSettings

Emit = Callable[[Event], None]


def _prefill(
    rt: LlamaRuntime, tokens: Sequence[int], should_stop: Callable[[], bool], emit: Emit
) -> bool:
    """Evaluate prompt tokens in batches; False if stopped."""
    total = len(tokens)
    step = rt.settings.n_batch
    rt.set_abort(should_stop)
    try:
        for start in range(0, total, step):
            if should_stop():
                return False
            try:
                rt.decode(tokens[start : start + step])
            except EngineError as exc:
                if should_stop() and exc.message == "aborted":
                    return False
                raise
            if total > step:
                emit(PrefillProgressEvent(min(start + step, total), total))
    finally:
        rt.set_abort(None)
    return True


def run_turn(
    rt: LlamaRuntime,
    messages: Sequence[Mapping[str, str]],
    sampling: SamplingSettings,
    *,
    should_stop: Callable[[], bool],
    emit: Emit,
    tools: str | None = None,
    json_schema: str | None = None,
    grammar: str | None = None,
) -> None:
    """Answer the last message, streaming events through ``emit``.

    ``tools`` (OpenAI's list, JSON) goes to the template; ``json_schema`` or ``grammar``
    (GBNF) constrains the reply with llama.cpp's grammar (without speculation).
    """
    t0 = time.perf_counter()
    if not messages:
        emit(ErrorEvent(ErrorKind.BAD_REQUEST, "There is no message to answer."))
        return
    try:
        tool_list = json.loads(tools) if tools else None
        prompt = rt.render(messages, thinking=sampling.thinking, tools=tool_list)
    except (TemplateError, ValueError) as exc:
        emit(ErrorEvent(ErrorKind.BAD_REQUEST, str(exc)))
        return
    n_ctx = rt.n_ctx
    if len(prompt) >= n_ctx:
        emit(
            ErrorEvent(
                ErrorKind.PROMPT_TOO_LONG,
                f"The prompt is {len(prompt):,} tokens; the context holds {n_ctx:,}.",
            )
        )
        return
    cached = rt.kv_tokens
    known = cached + ([rt.pending] if rt.pending is not None else [])
    reuse = min(common_prefix(cached, prompt), len(prompt) - 1)
    reused = rt.truncate(reuse)
    rt.pending = None
    new_tokens = len(prompt) - min(common_prefix(known, prompt), len(prompt) - 1)
    todo = prompt[reused:]
    base: dict[str, Any] = dict(
        prompt_tokens=len(prompt),
        tokens_reused=reused,
        tokens_prefilled=len(todo),
        tokens_new=new_tokens,
        n_ctx=n_ctx,
    )
    try:
        if not _prefill(rt, todo, should_stop, emit):
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
    if json_schema or grammar:
        sampling = replace(sampling, speculation="off")
    decode_reply(
        rt,
        sampling,
        should_stop,
        emit,
        base,
        (t0, t_prefilled),
        conversation_key(messages),
        json_schema=json_schema,
        grammar=grammar,
    )
    settle_pending(rt)


def settle_pending(rt: LlamaRuntime) -> None:
    """Put the last sampled token into the KV cache while the user reads the reply,
    so the next turn prefills only what is new."""
    token, rt.pending = rt.pending, None
    if token is not None and rt.llm.n_tokens < rt.n_ctx - 1:
        try:
            rt.decode([token])
        except EngineError:
            rt.pending = token
