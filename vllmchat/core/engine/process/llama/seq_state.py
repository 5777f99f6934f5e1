"""One sequence of a llama.cpp context: its state bytes saved and loaded, its cells
dropped, and a batch that carries tokens of several sequences (llama.cpp's C API)."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import llama_cpp  # before numpy: the CUDA build segfaults in the other order


def seq_state(ctx: Any, seq: int) -> bytearray:
    """The cells of sequence ``seq`` as llama.cpp's state bytes (written once, straight
    into the buffer returned)."""
    size = seq_state_size(ctx, seq)
    data = bytearray(size)
    if size == 0:
        return data
    buf = (ctypes.c_uint8 * size).from_buffer(data)
    written = int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, seq))
    del buf  # the buffer is exported until then
    if written < size:
        del data[written:]
    return data


def seq_state_size(ctx: Any, seq: int) -> int:
    """How many bytes ``seq_state`` would give (counted, nothing copied)."""
    return int(llama_cpp.llama_state_seq_get_size(ctx, seq))


def load_seq_state(ctx: Any, seq: int, data: bytes | bytearray, *, plain: bool = False) -> bool:
    """Make sequence ``seq`` hold saved state bytes (its cells before are dropped);
    False, and the sequence empty, when llama.cpp refuses them. ``plain``: the model
    keeps one KV cache (no sliding-window or recurrent part), so a state saved from a
    context of another number of sequences is told this one's (``restreamed``)."""
    if _load(ctx, seq, data):
        return True
    if plain:
        moved = restreamed(data, int(llama_cpp.llama_n_seq_max(ctx)))
        if moved is not None and _load(ctx, seq, moved):
            return True
    return False


def restreamed(data: bytes | bytearray, n_to: int) -> bytes | None:
    """One sequence's state bytes as a context of ``n_to`` sequences (each in a KV
    stream of its own) writes them: after an 8-byte head, a stream count, then each
    stream's cell count, only one of them not zero and followed by its cells
    (``llama_kv_cache::state_write``); None when the bytes are not of that shape."""
    at = _HEAD
    if len(data) < at + 8:
        return None
    (n_from,) = struct.unpack_from("<I", data, at)
    if n_from < 1 or len(data) < at + 4 + 4 * n_from:
        return None
    counts = [struct.unpack_from("<I", data, at + 4 + 4 * i)[0] for i in range(n_from)]
    lead = next((i for i, c in enumerate(counts) if c), n_from)
    trail = n_from - 1 - lead
    if lead == n_from or (trail and any(data[len(data) - 4 * trail :])):
        return None
    body = bytes(data[at + 4 + 4 * lead : len(data) - 4 * trail])
    return bytes(data[:at]) + struct.pack("<I", n_to) + body + bytes(4 * (n_to - 1))


_HEAD = 8  # what llama.cpp writes before the KV cache's own bytes


def _load(ctx: Any, seq: int, data: bytes | bytearray) -> bool:
    clear_seq(ctx, seq)
    if not data:
        return False
    src: Any
    if isinstance(data, bytearray):
        src = (ctypes.c_uint8 * len(data)).from_buffer(data)  # no copy
    else:
        src = ctypes.cast(ctypes.c_char_p(bytes(data)), ctypes.POINTER(ctypes.c_uint8))
    read = int(llama_cpp.llama_state_seq_set_data(ctx, src, len(data), seq))
    if read == 0:
        clear_seq(ctx, seq)
        return False
    return True


def copy_seq(ctx: Any, source: int, to: int) -> None:
    """Make sequence ``to`` hold ``source``'s cells (its own emptied first; across the
    context's streams llama.cpp copies the whole stream at the next decode)."""
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_seq_rm(mem, to, -1, -1)
    llama_cpp.llama_memory_seq_cp(mem, source, to, -1, -1)


def clear_seq(ctx: Any, seq: int) -> None:
    """Drop every cell of sequence ``seq``."""
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq, -1, -1)


def drop_after(ctx: Any, seq: int, n_keep: int) -> bool:
    """Drop sequence ``seq``'s cells from position ``n_keep`` on (False: refused)."""
    mem = llama_cpp.llama_get_memory(ctx)
    return bool(llama_cpp.llama_memory_seq_rm(mem, seq, n_keep, -1))


def seq_pos_min(ctx: Any, seq: int) -> int:
    """The first position sequence ``seq`` still holds (-1: none)."""
    return int(llama_cpp.llama_memory_seq_pos_min(llama_cpp.llama_get_memory(ctx), seq))


class SeqBatch:
    """A ``llama_batch`` of up to ``n_max`` tokens, each of one sequence."""

    def __init__(self, n_max: int) -> None:
        self.n_max = n_max
        self.batch = llama_cpp.llama_batch_init(n_max, 0, 1)

    @property
    def size(self) -> int:
        return int(self.batch.n_tokens)

    def clear(self) -> None:
        self.batch.n_tokens = 0

    def add(self, token: int, pos: int, seq: int, *, logits: bool) -> int:
        """Add a token at ``pos`` of sequence ``seq``; its row (logits: its output row)."""
        b, i = self.batch, int(self.batch.n_tokens)
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits
        b.n_tokens = i + 1
        return i

    def decode(self, ctx: Any) -> int:
        """llama_decode's status (0: done)."""
        return int(llama_cpp.llama_decode(ctx, self.batch))

    def close(self) -> None:
        if self.batch is not None:
            llama_cpp.llama_batch_free(self.batch)
            self.batch = None
