"""The engine's operations: one handler per request type of ``requests``.

A handler takes the engine process's ``Context`` (the runtime, the call's stop
flag, the turn's sender) and its request, and returns the reply the request type declares; an
``EngineError`` it raises reaches the caller as it is.
"""

from __future__ import annotations

import json
import time

import llama_cpp  # noqa: F401  (first: the CUDA build segfaults if numpy loads before it)

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.images import image_bytes
from vllmchat.core.engine.info import (
    KvUsage,
    ModelInfo,
    ProcessMemory,
    ReloadResult,
    SpeedSample,
    StateTransfer,
    TextScore,
)
from vllmchat.core.engine.process.inference.measure import measure_speed, process_memory
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.scoring import quantize, score_model
from vllmchat.core.engine.process.inference.turn import run_turn
from vllmchat.core.engine.process.llama.state_file import KVState, read_state, write_state
from vllmchat.core.engine.process.serving.registry import Context, handles
from vllmchat.core.models.hardware import HardwareInfo


@handles(rq.Ping)
def ping(ctx: Context, r: rq.Ping) -> str:
    return "pong"


@handles(rq.Chat)
def chat(ctx: Context, r: rq.Chat) -> None:
    """A turn, streamed; the worker turns an error into the turn's ErrorEvent."""
    with ctx.decoding():
        run_turn(
            ctx.require_runtime(),
            [dict(m) for m in r.messages],
            r.sampling,
            should_stop=ctx.stop_requested,
            emit=ctx.turn_emitter(),
            options=r.options,
        )


# -- the model ----------------------------------------------------------------------------
@handles(rq.Load)
def load(ctx: Context, r: rq.Load) -> ModelInfo:
    ctx.unload()
    ctx.runtime = LlamaRuntime(r.settings)
    ctx.choose_sender(ctx.runtime.settings)
    return ctx.runtime.info


@handles(rq.Reload)
def reload(ctx: Context, r: rq.Reload) -> ReloadResult:
    """Load with new settings, carrying the KV state over when it can."""
    old = ctx.require_runtime()
    t0 = time.perf_counter()
    old_binding = ctx.binding(old)
    data, tokens = old.save_state()
    replies = old._replies
    ctx.unload()
    ctx.runtime = new = LlamaRuntime(r.settings)
    ctx.choose_sender(new.settings)
    new._replies = replies
    reason = ""
    if not tokens:
        restored = True
    elif ctx.binding(new) != old_binding:
        restored, reason = False, "the KV cache type or attention settings changed"
    elif len(tokens) >= new.n_ctx:
        restored = False
        reason = f"the new context ({new.n_ctx}) is smaller than the {len(tokens)} tokens in use"
    else:
        restored = new.restore_state(data, tokens)
        reason = "" if restored else "llama.cpp refused the saved state"
    seconds = time.perf_counter() - t0
    return ReloadResult(new.info, restored, len(tokens), reason, seconds, len(data))


@handles(rq.SetThreads)
def set_threads(ctx: Context, r: rq.SetThreads) -> None:
    runtime = ctx.require_runtime()
    runtime.set_threads(r.n_threads, r.n_threads_batch)
    ctx.choose_sender(runtime.settings)  # fewer threads may leave a core to spare


# -- the KV state -------------------------------------------------------------------------
@handles(rq.ExportState)
def export_state(ctx: Context, r: rq.ExportState) -> StateTransfer:
    rt = ctx.require_runtime()
    data, tokens = rt.save_state()
    try:
        size = write_state(r.path, KVState(ctx.binding(rt), tokens, data))
    except OSError as exc:
        raise _not_written(exc) from exc
    return StateTransfer(len(tokens), size)


@handles(rq.ImportState)
def import_state(ctx: Context, r: rq.ImportState) -> StateTransfer:
    rt = ctx.require_runtime()
    state = read_state(r.path, expect=ctx.binding(rt))
    if len(state.tokens) >= rt.n_ctx:
        raise EngineError(
            ErrorKind.STATE_MISMATCH,
            f"The saved state holds {len(state.tokens)} tokens; the context holds {rt.n_ctx}.",
        )
    if not rt.restore_state(state.data, state.tokens):
        raise EngineError(ErrorKind.STATE_MISMATCH, "llama.cpp refused the saved state.")
    return StateTransfer(len(state.tokens), len(state.data))


@handles(rq.RememberReplies)
def remember_replies(ctx: Context, r: rq.RememberReplies) -> None:
    rt = ctx.require_runtime()
    for text, ids in r.pairs:
        rt.remember_reply(text, list(ids))


@handles(rq.Kv)
def kv(ctx: Context, r: rq.Kv) -> KvUsage:
    rt = ctx.require_runtime()
    return KvUsage(rt.llm.n_tokens, rt.n_ctx)


# -- tokens ---------------------------------------------------------------------------------
@handles(rq.Tokenize)
def tokenize(ctx: Context, r: rq.Tokenize) -> list[int]:
    return ctx.require_runtime().tokenize(r.text, special=False)


@handles(rq.ControlTokens)
def control_tokens(ctx: Context, r: rq.ControlTokens) -> list[int]:
    rt = ctx.require_runtime()
    return [i for i in r.ids if rt.is_special(i)]


@handles(rq.Render)
def render(ctx: Context, r: rq.Render) -> list[int]:
    rt = ctx.require_runtime()
    if r.raw:
        return rt.raw_prompt(r.messages[-1]["content"])
    try:
        return rt.render(
            [dict(m) for m in r.messages],
            thinking=r.thinking,
            images=[image_bytes(i) for i in r.images],
            tools=json.loads(r.tools) if r.tools else None,
        )
    finally:
        if rt.vision is not None:
            rt.vision.end_turn()


# -- the machine and measurements -----------------------------------------------------------
@handles(rq.Probe)
def probe(ctx: Context, r: rq.Probe) -> HardwareInfo:
    """RAM, GPUs and offload support, read where llama.cpp's backends live."""
    from vllmchat.core.models.hardware_probe import probe

    return probe()


@handles(rq.Memory)
def memory(ctx: Context, r: rq.Memory) -> ProcessMemory:
    """RSS and device memory of this process, with llama.cpp's buffer sums."""
    buffers = ctx.runtime.info.buffers_mib if ctx.runtime is not None else {}
    return process_memory(ctx.start_free, buffers)


@handles(rq.Measure)
def measure(ctx: Context, r: rq.Measure) -> SpeedSample:
    """Speed on the fixed workload (empties the KV cache)."""
    return measure_speed(
        ctx.require_runtime(), r.prompt_tokens, r.decode_tokens, ctx.stop_requested
    )


@handles(rq.Score)
def score(ctx: Context, r: rq.Score) -> TextScore:
    """Next-token quality of a model file on a fixed text (the quant lab). The chat
    model is unloaded first: two models at once may not fit."""
    ctx.unload()
    return score_model(r.request, ctx.stop_requested)


@handles(rq.Quantize)
def quantize_file(ctx: Context, r: rq.Quantize) -> int:
    return quantize(r.source, r.target, r.ftype, r.n_threads)


def _not_written(exc: OSError) -> EngineError:
    reason = exc.strerror or str(exc)
    return EngineError(
        ErrorKind.STORAGE,
        f"The conversation is saved; its KV state could not be written ({reason}): "
        "the next start re-reads it.",
    )


# The operations of other modules register when the engine process imports this one.
from vllmchat.core.engine.process.serving import (  # noqa: E402
    embed_handlers,  # noqa: F401
    state_handlers,  # noqa: F401
)
