"""The decode loop of a turn: sample, stream, evaluate — with speculation where it pays.

Tokens come from a queue: the next sampled token (not yet in the KV cache),
preceded after a verify by the accepted drafts (already in the KV cache).
Whatever ends the reply (a stop, end of generation, ``max_tokens``), the KV
cache then holds exactly the prompt and the streamed tokens, less the last
sampled one (``rt.pending``), as without speculation.
"""

from __future__ import annotations

import codecs
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    Event,
    StatsEvent,
    TokenEvent,
    TurnStats,
)
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.speculative import Acceptance, NgramIndex
from vllmchat.core.engine.process.llama.llama_adapter import sample_at, sample_next, sampler_for
from vllmchat.core.settings import SamplingSettings

Emit = Callable[[Event], None]


def conversation_key(messages: Sequence[Mapping[str, str]]) -> int:
    """Which conversation a request belongs to (acceptance is kept per conversation)."""
    return hash(tuple(m["content"] for m in messages[:2]))


@dataclass
class _Counts:
    drafted: int = 0
    accepted: int = 0


class _Reply:
    """One reply's decoding, with or without drafts."""

    def __init__(
        self,
        rt: LlamaRuntime,
        sampling: SamplingSettings,
        key: int,
        options: ChatOptions = PLAIN,
    ) -> None:
        self.rt, self.llm, self.sampling = rt, rt.llm, sampling
        self.sampler = sampler_for(rt.llm, sampling, options.json_schema, options.grammar)
        self.base = rt.llm.n_tokens  # the prompt, in the KV cache
        self.spec = rt.speculator
        self.spec.mode, self.spec.max_k = sampling.speculation, max(1, sampling.draft_max)
        self.note = ""
        self.acceptance: Acceptance = self.spec.for_conversation(key)
        self.index = NgramIndex(rt.kv_tokens) if self.spec.mode != "off" else None
        # The draft model reads token ids only: a conversation with images (negative ids
        # in the KV record) is drafted from the conversation's own n-grams.
        images = self.index is not None and any(t < 0 for t in self.index.tokens)
        self.draft = None if images else rt.draft
        if self.draft is not None and self.index is not None:
            self.draft.start(self.index.tokens)
        self.counts = _Counts()
        self.step = 0

    def next_tokens(self, token: int, room: int) -> list[tuple[int, bool]]:
        """Evaluate ``token`` (streamed, not yet in the KV cache) and sample what
        follows: accepted drafts (in the KV cache) then one sampled token (not)."""
        self.step += 1
        k = self.spec.choose_k(self.acceptance, self.step, room) if self.index else 0
        t = time.perf_counter()
        drafts = self._draft(token, k) if k else []
        if not drafts:  # a plain step, timed with its sampling as a verify is
            t = time.perf_counter()
            self.rt.decode([token])
            sampled_one = sample_next(self.llm, self.sampler)
            self.spec.after_single(time.perf_counter() - t)
            return [(sampled_one, False)]
        self.rt.decode_with_logits([token, *drafts])
        sampled: list[int] = []
        for j in range(len(drafts) + 1):
            sampled.append(sample_at(self.llm, self.sampler, j))
            if j == len(drafts) or sampled[-1] != drafts[j]:
                break
        accepted = len(sampled) - 1
        if not self.keep(self.llm.n_tokens - len(drafts) + accepted):
            raise EngineError(ErrorKind.INTERNAL, "The KV cache could not drop rejected drafts.")
        self.counts.drafted += len(drafts)
        self.counts.accepted += accepted
        seconds = time.perf_counter() - t
        self.spec.after_verify(self.acceptance, len(drafts), accepted, seconds, self.step)
        return [(s, True) for s in sampled[:-1]] + [(sampled[-1], False)]

    def _draft(self, token: int, k: int) -> list[int]:
        """Guesses from the draft model when one is loaded, else from the conversation."""
        assert self.index is not None
        draft = self.draft
        if draft is None:
            return self.index.draft(k)
        try:
            return draft.draft(self.index.tokens, k)  # the prompt and the reply so far
        except Exception as exc:  # its state broke: the reply goes on without it
            self.rt.drop_draft()
            self.draft = None
            self.note = f"The draft model failed ({exc}); speculation goes on without it."
            return self.index.draft(k)

    def keep(self, n_tokens: int) -> bool:
        """Drop the KV cells after ``n_tokens`` (rejected drafts, tokens not streamed);
        False when llama.cpp could not (the cache was cleared, nothing is pending)."""
        if self.llm.n_tokens <= n_tokens or self.rt.truncate(n_tokens) == n_tokens:
            return True
        self.rt.pending = None
        return False


def decode_reply(
    rt: LlamaRuntime,
    sampling: SamplingSettings,
    should_stop: Callable[[], bool],
    emit: Emit,
    base: dict[str, Any],
    times: tuple[float, float],
    key: int,
    *,
    options: ChatOptions = PLAIN,
) -> None:
    """Stream the reply to the prompt in the KV cache (its logits are the last); the
    options' ``json_schema`` or GBNF ``grammar`` constrains it (llama.cpp's grammar)."""
    t0, t_prefilled = times
    llm = rt.llm
    if sampling.seed >= 0:
        llm.set_seed(sampling.seed)
    reply = _Reply(rt, sampling, key, options)
    room = rt.n_ctx - llm.n_tokens
    max_new = max(0, min(sampling.max_tokens, room))
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    ids: list[int] = []
    parts: list[str] = []
    reason = "max_tokens" if max_new == sampling.max_tokens else "context_full"
    t_first = t_last = 0.0
    error: EngineError | None = None
    queue: deque[tuple[int, bool]] = deque()
    if max_new > 0:
        queue.append((sample_next(llm, reply.sampler), False))
    while queue:
        if should_stop():
            reason = "stopped"
            reply.keep(reply.base + len(ids))
            break
        token, _in_kv = queue.popleft()
        t_last = time.perf_counter()
        t_first = t_first or t_last
        if not sampling.ignore_eos and rt.is_stop(token):
            rt.pending, reason = token, "eos"
            reply.keep(reply.base + len(ids))
            break
        ids.append(token)
        text = decoder.decode(rt.piece(token))
        parts.append(text)
        emit(TokenEvent(text, token))
        if reply.index is not None:
            reply.index.append(token)
        if len(ids) >= max_new:
            rt.pending = token
            reply.keep(reply.base + len(ids) - 1)
            break
        if queue:
            continue  # an accepted draft, already in the KV cache
        rt.step_beside()  # the API slots' step, once this token is out (not before it)
        try:
            queue.extend(reply.next_tokens(token, max_new - len(ids)))
        except EngineError as exc:
            error = exc
            break
    tail = decoder.decode(b"", final=True)
    if tail:
        parts.append(tail)
        emit(TokenEvent(tail, -1))
    text = "".join(parts)
    rt.remember_reply(text, ids)
    stats = TurnStats(
        **base,
        prefill_s=t_prefilled - t0,
        ttft_s=(t_first - t0) if ids or t_first else 0.0,
        decode_tokens=len(ids),
        decode_s=t_last - t_first,
        stop_reason="error" if error else reason,
        kv_tokens=llm.n_tokens,
        drafted=reply.counts.drafted,
        accepted=reply.counts.accepted,
        note=reply.note,
    )
    emit(StatsEvent(stats))
    if error is not None:
        emit(ErrorEvent(error.kind, error.message, partial_text=text))
        return
    emit(DoneEvent(text, reason, stats, tuple(ids)))
