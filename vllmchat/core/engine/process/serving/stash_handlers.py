"""The engine's stash of named KV states in RAM (``core/engine/kv_stash.py``)."""

from __future__ import annotations

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.info import StateTransfer
from vllmchat.core.engine.kv_stash import Forget, Spill
from vllmchat.core.engine.process.llama.state_file import KVState, write_state
from vllmchat.core.engine.process.serving.registry import Context, handles
from vllmchat.core.engine.requests import Kept, KeptState


def _stashed(ctx: Context, key: str) -> KVState:
    state = ctx.stashes.get(key)
    if state is None:
        raise EngineError(ErrorKind.STATE_MISMATCH, f"No KV state is stashed as {key!r}.")
    return state


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


@handles(Kept)
def kept(ctx: Context, r: Kept) -> KeptState | None:
    state = ctx.stashes.get(r.key)
    return KeptState(tuple(state.tokens), len(state.data)) if state is not None else None
