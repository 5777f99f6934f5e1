"""The engine's stash of named KV states in RAM (``core/engine/kv_stash.py``)."""

from __future__ import annotations

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.info import StateTransfer
from vllmchat.core.engine.kv_stash import Forget, LiveTokens, Spill, Stash, Unstash
from vllmchat.core.engine.process.llama.state_file import KVState, write_state
from vllmchat.core.engine.process.serving.registry import Context, handles
from vllmchat.core.engine.requests import Kept, KeptState


def _stashed(ctx: Context, key: str) -> KVState:
    state = ctx.stashes.get(key)
    if state is None:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"No KV state is stashed as {key!r}.")
    return state


@handles(Stash)
def stash(ctx: Context, r: Stash) -> StateTransfer:
    rt = ctx.require_runtime()
    data, tokens = rt.save_state()
    ctx.stashes[r.key] = KVState(ctx.binding(rt), tokens, data)
    return StateTransfer(len(tokens), len(data))


@handles(Unstash)
def unstash(ctx: Context, r: Unstash) -> StateTransfer:
    rt = ctx.require_runtime()
    state = _stashed(ctx, r.key)
    if not rt.restore_state(state.data, state.tokens):
        del ctx.stashes[r.key]
        raise EngineError(ErrorKind.STATE_MISMATCH, "llama.cpp refused the stashed state.")
    return StateTransfer(len(state.tokens), len(state.data))


@handles(Spill)
def spill(ctx: Context, r: Spill) -> StateTransfer:
    state = _stashed(ctx, r.key)
    try:
        size = write_state(r.path, state)
    except OSError as exc:
        raise EngineError(
            ErrorKind.STORAGE,
            f"A client's KV state could not be written ({exc.strerror or exc}); it was dropped.",
        ) from exc
    finally:
        del ctx.stashes[r.key]
    return StateTransfer(len(state.tokens), size)


@handles(Forget)
def forget(ctx: Context, r: Forget) -> None:
    for key in r.keys:
        ctx.stashes.pop(key, None)


@handles(LiveTokens)
def live_tokens(ctx: Context, r: LiveTokens) -> list[int]:
    return ctx.require_runtime().kv_tokens


@handles(Kept)
def kept(ctx: Context, r: Kept) -> KeptState | None:
    state = ctx.stashes.get(r.key)
    return KeptState(tuple(state.tokens), len(state.data)) if state is not None else None
