"""The API clients' sequences beside the window's (llama-server's slots): every step
decodes one token of each running turn and a prefill chunk of those starting, in one
batch; a finished or stopped turn leaves at the next step, its state kept by key.

A slot is a sequence of the context (1 to ``api_slots``; 0 is the window's, run by
``turn.py``). A turn starts from the kept state sharing most of its prompt (its
client's own first, ``StateCache``): free where a slot still holds it, else restored
into a free slot from the engine's RAM or a state file.

Where every layer is on the GPU, ``llama_decode`` returns once the step is queued
there: the tokens sampled at the last step are turned into text and sent while the
GPU computes this one (llama-server does that work between its steps).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.api_states import StatesEvent
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    StatsEvent,
    TurnStats,
)
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.slot_fill import SlotFiller
from vllmchat.core.engine.process.inference.slot_pace import prompt_room, sends_while_decoding
from vllmchat.core.engine.process.inference.slot_state import Slot, SlotTurn
from vllmchat.core.engine.process.inference.speculative import common_prefix
from vllmchat.core.engine.process.inference.state_cache import Planned, StateCache
from vllmchat.core.engine.process.inference.turn import rendered_prompt
from vllmchat.core.engine.process.llama.llama_adapter import sample_at, sampler_for
from vllmchat.core.engine.process.llama.seq_state import SeqBatch, clear_seq

Send = Callable[[Any], None]


class SlotLoop:
    """The API slots of one loaded model; ``step`` runs one batched decode."""

    def __init__(
        self,
        rt: LlamaRuntime,
        cache: StateCache,
        send: Send,
        stopped: set[int],
    ) -> None:
        self.rt, self.cache, self.send, self.stopped = rt, cache, send, stopped
        self.slots = [Slot(seq) for seq in range(1, rt.settings.n_seq)]
        self.filler = SlotFiller(rt, cache)
        self.waiting: deque[tuple[int, rq.SlotChat]] = deque()
        self.batch = SeqBatch(max(rt.settings.n_batch, len(self.slots) + 1))
        self.steps = 0
        self.overlap = sends_while_decoding(rt)
        self.beside_window = False  # this step runs between the window turn's steps
        self.unsent: list[tuple[SlotTurn, int]] = []  # sampled, sent after the next launch
        self.outgoing: list[tuple[Any, ...]] = []  # as text, sent together

    @property
    def busy(self) -> bool:
        return bool(self.waiting) or any(s.turn is not None for s in self.slots)

    # -- turns in and out -----------------------------------------------------------
    def admit(self, rid: int, request: rq.SlotChat) -> None:
        """Take a turn; it starts at once where a slot is free, else when one frees."""
        if not self.slots:
            self._fail(rid, ErrorKind.BAD_REQUEST, "The model was loaded without API slots.")
            return
        self.waiting.append((rid, request))
        self._start_waiting()

    def _start_waiting(self) -> None:
        if self.waiting and any(s.turn is None for s in self.slots):
            self.flush()  # sampled tokens go out before another turn's rendering and plan
        while self.waiting:
            free = [s for s in self.slots if s.turn is None]
            if not free:
                return
            rid, request = self.waiting.popleft()
            if rid in self.stopped:
                self.stopped.discard(rid)
                self._tell(rq.TurnEvent(rid, DoneEvent("", "stopped", TurnStats())))
                continue
            self._start(rid, request, free)

    def _start(self, rid: int, r: rq.SlotChat, free: list[Slot]) -> None:
        rt, t0 = self.rt, time.perf_counter()
        if r.options.images:
            self._fail(
                rid,
                ErrorKind.BAD_REQUEST,
                "Images are read in the window's sequence only; an API slot takes text.",
            )
            return
        rendered = rendered_prompt(rt, [dict(m) for m in r.messages], r.sampling, r.options)
        if isinstance(rendered, ErrorEvent):
            self.stopped.discard(rid)
            self._tell(rq.TurnEvent(rid, rendered))
            return
        prompt = rendered[0]
        if r.fork_window:  # the window's task: from its cells, nothing kept after
            plan = Planned("", "")
            slot = min(free, key=lambda s: (bool(s.tokens), s.used))  # an empty one first
            source = self.filler.fork_window(slot, prompt)
        else:
            plan = self.cache.plan(prompt, r.client, r.reuse)
            slot = self._choose(free, plan.from_key, prompt)
            if not r.reuse:  # the prompt read whole
                clear_seq(rt.llm.ctx, slot.seq)
                slot.tokens, slot.key = [], ""
            source = self.filler.fill(slot, plan.from_key)
        shared = self.filler.keep_prefix(slot, prompt)
        try:
            sampler = sampler_for(rt.llm, r.sampling, r.options.json_schema, r.options.grammar)
        except (ValueError, RuntimeError) as exc:
            self._fail(rid, ErrorKind.BAD_REQUEST, f"The grammar could not be read: {exc}")
            return
        base = dict(
            prompt_tokens=len(prompt),
            tokens_reused=shared,
            tokens_prefilled=len(prompt) - shared,
            tokens_new=len(prompt) - shared,
            n_ctx=rt.n_ctx,
            note=f"state: {source}",
        )
        room = rt.n_ctx - len(prompt)
        max_new = max(0, min(r.sampling.max_tokens, room))
        limit = "max_tokens" if max_new == r.sampling.max_tokens else "context_full"
        slot.turn = SlotTurn(
            rid,
            plan.keep_as,
            bool(r.client),
            prompt,
            shared,
            sampler,
            max_new,
            r.sampling.ignore_eos,
            limit,
            base,
            t0,
            place_s=time.perf_counter() - t0,
        )
        slot.key = plan.keep_as

    def _choose(self, free: list[Slot], from_key: str, prompt: list[int]) -> Slot:
        """The free slot holding ``from_key``; else the one sharing most of the prompt
        (16 tokens or more), an empty one, the least recently used."""
        for slot in free:
            if from_key and slot.key == from_key:
                return slot
        if not from_key:
            best = max(free, key=lambda s: common_prefix(s.tokens, prompt))
            if common_prefix(best.tokens, prompt) >= 16:
                return best
        empty = [s for s in free if not s.tokens]
        return empty[0] if empty else min(free, key=lambda s: s.used)

    def abandon(self, message: str, kind: ErrorKind = ErrorKind.ENGINE_DIED) -> None:
        """End every turn with ``message`` (the model goes or its context is emptied)."""
        self.flush()
        self.filler.copy_kept()
        for slot in self.slots:
            if slot.turn is not None:
                turn, slot.turn = slot.turn, None
                self._fail(turn.rid, kind, message, "".join(turn.parts))
            slot.tokens, slot.key = [], ""
        while self.waiting:
            rid, _ = self.waiting.popleft()
            self._fail(rid, kind, message)

    def _fail(self, rid: int, kind: ErrorKind, message: str, partial: str = "") -> None:
        self.stopped.discard(rid)
        self._tell(rq.TurnEvent(rid, ErrorEvent(kind, message, partial_text=partial)))

    # -- one step ---------------------------------------------------------------------
    def step(self, beside_window: bool = False) -> bool:
        """One step: a token of each turn decoding, and prefill chunks.

        Where this build's small batches are exact (``rt.exactness``), prefill chunks
        (which never hold a prompt's last token) go first, in a batch of their own; then
        the rows whose logits are sampled (a token of each running turn, the last prompt
        token of each turn whose prompt is otherwise in, this step's chunk included): a
        reply is then the same alone, beside others prefilling, and fresh or from a kept
        state, and a turn's first token comes in the step that reads its prompt. The
        states of the turns that ended are copied out after their last events.
        ``beside_window``: between the window turn's steps, or while the app asks (the
        clients' prompts wait where a chunk would hold the loop: ``prompt_room``).
        Whether anything was decoded."""
        self.beside_window = beside_window
        self._start_waiting()
        steps = self.steps
        try:
            self._decode_step()
        finally:  # a listed state is in RAM before anything asks for it
            self._send_tokens()
            self.filler.copy_kept()
        self._start_waiting()
        return self.steps > steps

    def _decode_step(self) -> None:
        for slot in self.slots:
            if slot.turn is not None and slot.turn.rid in self.stopped:
                self._finish(slot, "stopped")
        running = [s for s in self.slots if s.turn is not None]
        if not running:
            return
        if self.rt.exactness.exact:
            starting = [
                s for s in running if s.turn is not None and s.turn.at < len(s.turn.prompt) - 1
            ]
            if starting:  # a decoding step (the usual one) has no prefill batch
                self._decode(starting, sampled=False, prefill=True)
            self._decode(running, sampled=True, prefill=False)
        else:
            self._decode(running, sampled=True, prefill=True)

    def _decode(self, running: list[Slot], sampled: bool, prefill: bool) -> bool:
        """Decode one batch of ``running``'s rows and take what it gives; False where
        llama.cpp refused it."""
        rows = self._fill_batch(running, sampled, prefill)
        if self.batch.size == 0:
            return True
        status = self.batch.decode(self.rt.llm.ctx)
        self.steps += 1
        self.flush()  # the last step's tokens, while this one runs on the GPU
        if status != 0:
            self._failed_step(running, status)
            return False
        now = time.perf_counter()
        for slot in running:
            turn = slot.turn
            if turn is None or (slot.seq not in rows and -slot.seq not in rows):
                continue
            if -slot.seq not in rows:  # its last token (streamed) is in the cache now
                assert turn.pending is not None
                slot.tokens.append(turn.pending)
                turn.pending = None
            else:
                hi = turn.at + rows[-slot.seq]
                slot.tokens.extend(turn.prompt[turn.at : hi])
                turn.at = hi
                if hi < len(turn.prompt):
                    continue
                turn.t_prefilled = now
            row = rows.get(slot.seq)
            if row is None:
                continue
            if turn.max_new <= 0:
                self._finish(slot, turn.limit)
                continue
            self._take(slot, sample_at(self.rt.llm, turn.sampler, row))
        self._send_tokens()
        return True

    def _fill_batch(self, running: list[Slot], sampled: bool, prefill: bool) -> dict[int, int]:
        """Rows of the batch: ``seq`` -> its logits row; ``-seq`` -> prompt tokens added.

        ``sampled``: each turn's streamed token, and the last prompt token of each turn
        whose prompt is otherwise in (or the whole rest of its prompt, with ``prefill``);
        ``prefill``: chunks of the prompts starting (up to their last token but one
        where ``sampled`` is off, which the next step's sampled batch then holds)."""
        batch, rows = self.batch, {}
        batch.clear()
        budget = prompt_room(
            batch.n_max, beside_window=self.beside_window, computes_in_call=not self.overlap
        )
        for slot in running:
            turn = slot.turn
            if sampled and turn is not None and turn.pending is not None:
                rows[slot.seq] = batch.add(turn.pending, len(slot.tokens), slot.seq, logits=True)
        for slot in running:
            turn = slot.turn
            room = batch.n_max - batch.size
            if prefill:
                room = min(room, budget)
            if turn is None or turn.pending is not None or room <= 0:
                continue
            last = len(turn.prompt) - 1
            if prefill:
                end = len(turn.prompt) if sampled else last
                if turn.at >= end:
                    continue
                hi = min(end, turn.at + room)
            elif turn.at == last:
                hi = len(turn.prompt)
            else:
                continue
            for pos in range(turn.at, hi):
                row = batch.add(turn.prompt[pos], pos, slot.seq, logits=pos == last)
            rows[-slot.seq] = hi - turn.at
            budget -= hi - turn.at
            if hi == len(turn.prompt):
                rows[slot.seq] = row
        return rows

    def _take(self, slot: Slot, token: int) -> None:
        """A sampled token: the end of the reply, or streamed (in the KV cache next step)."""
        turn, rt = slot.turn, self.rt
        assert turn is not None
        turn.t_last = time.perf_counter()
        turn.t_first = turn.t_first or turn.t_last
        if not turn.ignore_eos and rt.is_stop(token):
            self._finish(slot, "eos")
            return
        turn.ids.append(token)
        if self.overlap:
            self.unsent.append((turn, token))
        else:
            self._emit(turn, token)
        if len(turn.ids) >= turn.max_new:
            self._finish(slot, turn.limit)
            return
        turn.pending = token

    def _emit(self, turn: SlotTurn, token: int) -> None:
        text = turn.decoder.decode(self.rt.piece(token))
        turn.parts.append(text)
        self.outgoing.append(("tok", turn.rid, text, token))

    def _send_tokens(self) -> None:
        """The tokens turned into text since the last send, as one message (on two cores
        the loop writes its messages itself: one write a step, not one a token)."""
        if self.outgoing:
            self.send(rq.tokens_message(self.outgoing))
            self.outgoing = []

    def _tell(self, message: Any) -> None:
        """Send ``message`` after the tokens before it."""
        self._send_tokens()
        self.send(message)

    def flush(self, only: SlotTurn | None = None) -> None:
        """Send the tokens sampled and not yet sent (``only``: that turn's)."""
        if not self.unsent:
            return
        kept: list[tuple[SlotTurn, int]] = []
        for turn, token in self.unsent:
            if only is None or turn is only:
                self._emit(turn, token)
            else:
                kept.append((turn, token))
        self.unsent = kept
        self._send_tokens()

    def _finish(self, slot: Slot, reason: str) -> None:
        """End the slot's turn: its last events, its state kept under its key."""
        turn, slot.turn = slot.turn, None
        assert turn is not None
        self.flush(turn)
        tail = turn.decoder.decode(b"", final=True)
        if tail:
            turn.parts.append(tail)
            self.outgoing.append(("tok", turn.rid, tail, -1))
        text = "".join(turn.parts)
        self.rt.remember_reply(text, turn.ids)
        decode_from = turn.t_first or turn.t_last
        stats = TurnStats(
            **turn.base,
            prefill_s=(turn.t_prefilled or time.perf_counter()) - turn.t0,
            ttft_s=(turn.t_first - turn.t0) if turn.t_first else 0.0,
            decode_tokens=len(turn.ids),
            decode_s=turn.t_last - decode_from if turn.ids else 0.0,
            stop_reason=reason,
            kv_tokens=len(slot.tokens),
        )
        self.filler.keep(slot, turn.keep_as, len(turn.prompt), turn.named)
        slot.used = time.monotonic()
        self.stopped.discard(turn.rid)
        self._tell(
            rq.TurnEvent(turn.rid, StatesEvent(turn.keep_as, self.cache.snapshot(), turn.place_s))
        )
        self._tell(rq.TurnEvent(turn.rid, StatsEvent(stats)))
        self._tell(rq.TurnEvent(turn.rid, DoneEvent(text, reason, stats, tuple(turn.ids))))

    def _failed_step(self, running: list[Slot], status: int) -> None:
        """llama.cpp refused the batch: its turns end with the reason, their cells go."""
        error = EngineError(
            ErrorKind.INTERNAL if status < 0 else ErrorKind.CONTEXT_FULL,
            f"llama.cpp could not decode the batch of {len(running)} turns (status {status}).",
        )
        self.flush()
        for slot in running:
            turn, slot.turn = slot.turn, None
            assert turn is not None
            clear_seq(self.rt.llm.ctx, slot.seq)
            slot.tokens, slot.key = [], ""
            self._fail(turn.rid, error.kind, error.message, "".join(turn.parts))

    def close(self) -> None:
        self.batch.close()
