"""How a slot step is paced: whether its tokens are sent while the next step runs,
and whether it reads the prompts of the clients starting.

A step reads as much of the prompts starting as its batch holds (llama-server's way),
except where the decode computes in its call (the CPU, layers in RAM) and the window
is in use: beside the window's turn, and for ``ASKING_S`` after the calls a window's
turn starts with (resume, render), a step only decodes the clients' streaming tokens,
and their prompts wait. A 512-token chunk takes 1.7 s on a 2-core CPU; the window's
calls and tokens would each wait for one. The prompts are not read
in smaller chunks instead: a prompt's cells depend on the chunks it was read in, and a
reply is the same alone and beside others only where its prompt was read alike.
"""

from __future__ import annotations

import os

from vllmchat.core.engine.process.inference.runtime import LlamaRuntime

ASKING_S = 1.0  # after a call, the clients' prompts wait this long (the next call is near)


def prompt_room(room: int, *, beside_window: bool, computes_in_call: bool) -> int:
    """Prompt tokens a step may read, of the ``room`` left in its batch: none beside
    the window where the decode computes in its call (a chunk would hold the loop)."""
    return 0 if beside_window and computes_in_call else room


def sends_while_decoding(rt: LlamaRuntime) -> bool:
    """Whether a step's tokens are sent after the next step is queued: where the whole
    model is on the GPU (``llama_decode`` returns before its result is read). On the
    CPU the decode computes in the call, and sending after it would hold every token
    back a step. ``VLLMCHAT_SLOT_OVERLAP`` (0 or 1) overrides, for comparisons."""
    told = os.environ.get("VLLMCHAT_SLOT_OVERLAP", "")
    if told in ("0", "1"):
        return told == "1"
    placement = rt.settings.placement
    return (
        rt.info.gpu_offload
        and placement.all_on_gpu(rt.info.n_layer)
        and placement.n_cpu_moe <= 0
        and not placement.override_tensors
    )
