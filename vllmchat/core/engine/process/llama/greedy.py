"""Greedy sampling on the logits themselves: llama.cpp's greedy chain, without its
pass over a candidate array of the whole vocabulary.

llama-cpp-python's chain for temperature 0 is the repeat penalty over the last
64 sampled tokens, then the first maximum. Its C code fills a 12-byte candidate
for every token of the vocabulary and looks each one up in the penalty's table:
about 1 ms a token for Gemma's 262,144 tokens, as long as a decode step of a
small model on a GPU, and paid again at every position a speculative verify
samples. Here the same float32 arithmetic runs on a view of the logits and the
few penalized tokens (changed in the row and put back), so the token is the same and
the cost is one ``argmax``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import llama_cpp  # before numpy: the CUDA build segfaults in the other order
import numpy as np

PENALTY_LAST_N = 64  # llama-cpp-python's last_n_tokens_size, the chain's window


class GreedySampler:
    """The token llama.cpp's greedy chain would pick, with the same penalty history."""

    def __init__(self, llm: llama_cpp.Llama, repeat_penalty: float) -> None:
        self.llm = llm
        self.penalty = np.float32(repeat_penalty)
        self.history: deque[int] = deque(maxlen=PENALTY_LAST_N)
        self.n_vocab = llm.n_vocab()

    def sample(self, _ctx: Any, index: int) -> int:
        """The pick from the logits of output row ``index`` (-1: the last); it joins the
        penalty's history, as the chain's accept does."""
        pointer = llama_cpp.llama_get_logits_ith(self.llm.ctx, index)
        logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
        if self.history and self.penalty != 1:
            # penalized in place and put back after: a copy of the row would cost
            # more than the argmax (0.5 MB for a 128k vocabulary)
            seen = np.fromiter(set(self.history), dtype=np.int64)
            values = logits[seen]  # a copy (fancy indexing)
            logits[seen] = np.where(values <= 0, values * self.penalty, values / self.penalty)
            try:
                token = int(np.argmax(logits))  # the first maximum, as llama.cpp's greedy
            finally:
                logits[seen] = values  # the row as llama.cpp wrote it
        else:
            token = int(np.argmax(logits))
        self.history.append(token)
        return token
