"""How a slot step is paced: whether its tokens are sent while the next step runs,
and how much of a prompt it reads.

A step reads as much of the prompts starting as its batch holds (llama-server's way),
except beside the window's turn: there a step's prompt chunk is cut to about
``BESIDE_WINDOW_S`` of compute, measured per token on the steps before, so that a long
API prompt (a 512-token chunk takes 1.7 s on a 2-core CPU) never holds up the window's
tokens for longer than that.
"""

from __future__ import annotations

import os

from vllmchat.core.engine.process.inference.runtime import LlamaRuntime

BESIDE_WINDOW_S = 0.05
MIN_CHUNK = 16  # the fewest prompt tokens a step beside the window still reads
MIN_TIMED = 32  # smaller batches cost more per token (they read the weights for few rows)


class PrefillPace:
    """The cost of a batch's token, measured where the decode computes in its call."""

    def __init__(self, measures: bool) -> None:
        self.measures = measures
        self.token_s = 0.0  # seconds per batch token; 0: not measured yet

    def timed(self, tokens: int, seconds: float) -> None:
        """A decoded batch of ``tokens`` that took ``seconds``."""
        if not self.measures or tokens < MIN_TIMED or seconds <= 0:
            return
        cost = seconds / tokens
        self.token_s = cost if self.token_s <= 0 else 0.5 * (self.token_s + cost)

    def chunk(self, room: int, beside_window: bool) -> int:
        """Prompt tokens a step may read, of the ``room`` left in its batch."""
        if not beside_window or self.token_s <= 0:
            return room
        return min(room, max(MIN_CHUNK, int(BESIDE_WINDOW_S / self.token_s)))


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
