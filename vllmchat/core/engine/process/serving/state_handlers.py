"""The API clients' kept KV states (``core/engine/api_states.py``): where they are
kept, written out, listed."""

from __future__ import annotations

from vllmchat.core.engine.api_states import KeepStates, ListStates, SaveStates, StatesChanged
from vllmchat.core.engine.process.serving.registry import Context, handles


@handles(KeepStates)
def keep_states(ctx: Context, r: KeepStates) -> StatesChanged:
    ctx.states_policy = (r.root, max(0, r.ram_budget), max(0, r.disk_cap))
    ctx.bind_states()
    return ctx.states.snapshot()


@handles(SaveStates)
def save_states(ctx: Context, r: SaveStates) -> StatesChanged:
    ctx.states.save_all()
    return ctx.states.snapshot()


@handles(ListStates)
def list_states(ctx: Context, r: ListStates) -> StatesChanged:
    return ctx.states.snapshot()
