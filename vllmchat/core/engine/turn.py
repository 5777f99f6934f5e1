"""One chat turn: reuse the cached prefix, prefill the rest, stream sampled tokens."""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Mapping, Sequence

from vllmchat.core.chat_format import TemplateError
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    Event,
    PrefillProgressEvent,
    StatsEvent,
    TokenEvent,
    TurnStats,
)
from vllmchat.core.engine.llama_adapter import sample_next, sampler_for
from vllmchat.core.engine.runtime import LlamaRuntime, common_prefix
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
) -> None:
    """Answer the last message, streaming events through ``emit``."""
    t0 = time.perf_counter()
    if not messages:
        emit(ErrorEvent(ErrorKind.BAD_REQUEST, "There is no message to answer."))
        return
    try:
        prompt = rt.render(messages, thinking=sampling.thinking)
    except TemplateError as exc:
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
    base = dict(
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
    _decode_loop(rt, sampling, should_stop, emit, base, t0, t_prefilled)


def _decode_loop(
    rt: LlamaRuntime,
    sampling: SamplingSettings,
    should_stop: Callable[[], bool],
    emit: Emit,
    base: dict[str, int],
    t0: float,
    t_prefilled: float,
) -> None:
    llm = rt.llm
    if sampling.seed >= 0:
        llm.set_seed(sampling.seed)
    sampler = sampler_for(llm, sampling)
    room = rt.n_ctx - llm.n_tokens
    max_new = max(0, min(sampling.max_tokens, room))
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    ids: list[int] = []
    parts: list[str] = []
    reason = "max_tokens" if max_new == sampling.max_tokens else "context_full"
    t_first = t_last = 0.0
    error: EngineError | None = None
    for i in range(max_new):
        if should_stop():
            reason = "stopped"
            break
        token = sample_next(llm, sampler)
        t_last = time.perf_counter()
        if i == 0:
            t_first = t_last
        if not sampling.ignore_eos and rt.is_stop(token):
            rt.pending = token
            reason = "eos"
            break
        ids.append(token)
        text = decoder.decode(rt.piece(token))
        parts.append(text)
        emit(TokenEvent(text, token))
        if i == max_new - 1:
            rt.pending = token
            break
        try:
            rt.decode([token])
        except EngineError as exc:
            error = exc
            break
    tail = decoder.decode(b"", final=True)
    if tail:
        parts.append(tail)
        emit(TokenEvent(tail, -1))
    reply = "".join(parts)
    rt.remember_reply(reply, ids)
    stats = TurnStats(
        **base,
        prefill_s=t_prefilled - t0,
        ttft_s=(t_first - t0) if ids or t_first else 0.0,
        decode_tokens=len(ids),
        decode_s=t_last - t_first,
        stop_reason="error" if error else reason,
        kv_tokens=llm.n_tokens,
    )
    emit(StatsEvent(stats))
    if error is not None:
        emit(ErrorEvent(error.kind, error.message, partial_text=reply))
        return
    emit(DoneEvent(reply, reason, stats, tuple(ids)))
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
