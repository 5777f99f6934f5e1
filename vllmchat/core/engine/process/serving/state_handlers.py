"""The KV states the engine keeps by key (``core/engine/api_states.py``): where they
are kept, the window's conversations kept and resumed, written out, listed."""

from __future__ import annotations

from vllmchat.core.engine.api_states import (
    ForgetState,
    KeepStates,
    KeepWindow,
    ListStates,
    ResumeWindow,
    SaveStates,
    StatesChanged,
    WindowKept,
)
from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.process.serving.registry import Context, handles

MIN_WINDOW_TOKENS = 64  # fewer are cheaper to read again than to restore


@handles(KeepStates)
def keep_states(ctx: Context, r: KeepStates) -> StatesChanged:
    ctx.states_policy = (r.root, max(0, r.ram_budget), max(0, r.disk_cap))
    ctx.bind_states()
    return ctx.states.snapshot()


@handles(KeepWindow)
def keep_window(ctx: Context, r: KeepWindow) -> WindowKept:
    rt = ctx.require_runtime()
    data, tokens = rt.save_state()
    if len(tokens) < MIN_WINDOW_TOKENS:
        return WindowKept(failure=ctx.states.failure)
    ctx.states.keep_written(r.key, tokens, data)
    if r.wait:
        ctx.states.flush()
    kept = r.key in ctx.states.entries
    return WindowKept(len(tokens) if kept else 0, len(data), ctx.states.failure)


@handles(ResumeWindow)
def resume_window(ctx: Context, r: ResumeWindow) -> int:
    rt = ctx.require_runtime()
    state = ctx.states.state(r.key)
    if state is None:
        return 0
    try:
        restored = rt.restore_state(state.data, state.tokens)
    except EngineError:
        restored = False
    if not restored:  # another layout's bytes, or more tokens than the context holds
        ctx.states.forget(r.key)
        return 0
    return len(state.tokens)


@handles(ForgetState)
def forget_state(ctx: Context, r: ForgetState) -> StatesChanged:
    ctx.states.forget(r.key)
    return ctx.states.snapshot()


@handles(SaveStates)
def save_states(ctx: Context, r: SaveStates) -> StatesChanged:
    ctx.states.save_all()
    return ctx.states.snapshot()


@handles(ListStates)
def list_states(ctx: Context, r: ListStates) -> StatesChanged:
    return ctx.states.snapshot()
