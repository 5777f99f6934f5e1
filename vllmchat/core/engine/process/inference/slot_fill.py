"""What a slot's sequence holds before a turn: the state it starts from (already in
the slot, from the engine's RAM, or read from a state file), cut back to the prompt's
exact prefix; and the state a turn leaves, kept by key (``StateCache``)."""

from __future__ import annotations

from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.slot_state import Slot
from vllmchat.core.engine.process.inference.speculative import common_prefix
from vllmchat.core.engine.process.inference.state_cache import StateCache
from vllmchat.core.engine.process.llama.seq_state import (
    clear_seq,
    copy_seq,
    drop_after,
    load_seq_state,
    seq_pos_min,
    seq_state,
    seq_state_size,
)

SLOT, RAM, DISK, NONE, WINDOW = "slot", "ram", "disk", "none", "window"
WINDOW_SEQ = 0
MIN_FORK = 16  # fewer shared tokens than this are read again instead


class SlotFiller:
    """Fills slots from kept states and keeps what their turns leave."""

    def __init__(self, rt: LlamaRuntime, cache: StateCache):
        self.rt, self.cache = rt, cache
        self.to_copy: list[tuple[Slot, str, list[int], int, bool]] = []  # listed, not copied

    def fill(self, slot: Slot, from_key: str) -> str:
        """Make ``slot`` hold the state ``from_key``; where it came from (NONE: the
        slot keeps what it held, which the prompt may share)."""
        if not from_key or slot.key == from_key:
            return SLOT if from_key else NONE
        entry = self.cache.entries.get(from_key)
        source = DISK if entry is not None and entry.where == DISK else RAM
        state = self.cache.state(from_key)
        if state is None or len(state.tokens) >= self.rt.n_ctx:
            return NONE
        ctx = self.rt.llm.ctx
        if not load_seq_state(ctx, slot.seq, state.data, plain=self.rt.plain_kv):
            slot.tokens, slot.key = [], ""
            return NONE
        slot.tokens, slot.key = list(state.tokens), from_key
        return source

    def fork_window(self, slot: Slot, prompt: list[int]) -> str:
        """Make ``slot`` hold a copy of the window sequence's cells where they share
        the prompt's start (a task of the window's conversation); WINDOW, else NONE."""
        llm = self.rt.llm
        held = [int(t) for t in llm.input_ids[: llm.n_tokens]]
        clear_seq(llm.ctx, slot.seq)
        slot.tokens, slot.key = [], ""
        if common_prefix(held, prompt) < MIN_FORK:
            return NONE
        copy_seq(llm.ctx, WINDOW_SEQ, slot.seq)
        slot.tokens = held
        return WINDOW

    def keep_prefix(self, slot: Slot, prompt: list[int]) -> int:
        """Cut the slot back to the prompt's exact prefix (one token short of the whole
        prompt, whose logits the turn needs); the tokens kept."""
        ctx = self.rt.llm.ctx
        shared = min(common_prefix(slot.tokens, prompt), len(prompt) - 1)
        if shared < len(slot.tokens):
            n_swa = self.rt.info.n_swa
            window_gone = (
                n_swa > 0
                and not self.rt.settings.swa_full
                and seq_pos_min(ctx, slot.seq) > max(0, shared - n_swa)
            )
            if shared <= 0 or window_gone or not drop_after(ctx, slot.seq, shared):
                clear_seq(ctx, slot.seq)
                shared = 0
            del slot.tokens[shared:]
        return shared

    def keep(self, slot: Slot, key: str, prompt_tokens: int, named: bool) -> None:
        """List the slot's state as ``key`` (its cells stay in the slot too); its bytes
        are copied into RAM by ``copy_kept``, once the turn's last events have gone."""
        slot.key = key
        if key:
            size = seq_state_size(self.rt.llm.ctx, slot.seq)
            self.cache.reserve(key, slot.tokens, size, prompt_tokens, named)
            self.to_copy.append((slot, key, list(slot.tokens), prompt_tokens, named))

    def copy_kept(self) -> None:
        """Copy the states ``keep`` listed into RAM (on a GPU 3 ms for a 1B model's 150
        tokens, 15 ms for an 8B's: no reply's end waits for them)."""
        for slot, key, tokens, prompt_tokens, named in self.to_copy:
            data = seq_state(self.rt.llm.ctx, slot.seq)
            self.cache.keep(key, tokens, data, prompt_tokens, named)
        self.to_copy.clear()
