"""A draft model: a small GGUF with the model's vocabulary that guesses the next
tokens greedily in its own context, in the engine process beside the model.

It is refused with the reason when its vocabulary differs (the hash of the
token list) or when it does not fit (the estimate against free memory).
"""

from __future__ import annotations

from collections.abc import Sequence

import llama_cpp
import numpy as np

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.model_check import check_model_file
from vllmchat.core.engine.process.inference.speculative import common_prefix
from vllmchat.core.engine.process.llama.llama_adapter import drop_kv_after
from vllmchat.core.gguf_header import read_header
from vllmchat.core.models.description import describe
from vllmchat.core.models.drafts import TOKENS_KEY, vocab_fingerprint
from vllmchat.core.models.hardware_probe import probe
from vllmchat.core.models.memory import FitSettings, estimate
from vllmchat.core.placement import Placement
from vllmchat.core.settings import LoadSettings

MIB = 2**20


def draft_settings(settings: LoadSettings) -> LoadSettings:
    """The draft's own load settings: its file and GPU layers, the model's context."""
    return LoadSettings(
        model_path=settings.draft_model,
        placement=Placement(n_gpu_layers=settings.draft_n_gpu_layers),
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        n_threads_batch=settings.n_threads_batch,
        flash_attn=settings.flash_attn,
    )


def check_fits(settings: LoadSettings) -> None:
    """Refuse a draft model that does not fit, with the figures."""
    header = check_model_file(settings.model_path)
    hw = probe()
    need = estimate(describe(header), FitSettings.of(settings, gpu=hw.gpu_offload))
    if need.ram > hw.ram_available:
        raise EngineError(
            ErrorKind.OOM_LOAD,
            f"The draft model needs {need.ram / MIB:,.0f} MiB of RAM; "
            f"{hw.ram_available / MIB:,.0f} MiB are free.",
            "Pick a smaller draft model, or none.",
        )
    if hw.gpu_offload and settings.placement.uses_gpu and need.vram > hw.vram_free:
        raise EngineError(
            ErrorKind.OOM_LOAD,
            f"The draft model needs {need.vram / MIB:,.0f} MiB of GPU memory "
            f"({settings.placement.n_gpu_layers} layers); {hw.vram_free / MIB:,.0f} MiB are free.",
            "Put fewer of its layers on the GPU (draft_n_gpu_layers).",
        )


def check_vocabulary(draft: str, target: str) -> None:
    """Refuse a draft model whose token list differs from the model's."""
    mine, theirs = read_header(draft), read_header(target)
    if vocab_fingerprint(mine) and vocab_fingerprint(mine) == vocab_fingerprint(theirs):
        return
    n_draft = mine.array_lengths.get(TOKENS_KEY, 0)
    n_target = theirs.array_lengths.get(TOKENS_KEY, 0)
    raise EngineError(
        ErrorKind.BAD_REQUEST,
        f"The draft model's vocabulary differs from the model's ({n_draft:,} against "
        f"{n_target:,} tokens, or other tokens): it cannot draft for it.",
        "Pick a draft model of the same family (the settings list those that match).",
    )


class DraftModel:
    """Greedy guesses from a small model kept in step with the conversation."""

    def __init__(self, settings: LoadSettings, target: llama_cpp.Llama) -> None:
        draft = draft_settings(settings)
        check_model_file(draft.model_path)  # a folder or a damaged file: said as for the model
        check_vocabulary(draft.model_path, settings.model_path)
        check_fits(draft)
        try:
            self.llm = llama_cpp.Llama(
                draft.model_path,
                n_ctx=draft.n_ctx,
                n_gpu_layers=draft.placement.n_gpu_layers,
                n_threads=draft.n_threads,
                n_threads_batch=draft.n_threads_batch or draft.n_threads,
                flash_attn=draft.flash_attn,
                n_batch=512,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise EngineError(
                ErrorKind.BAD_REQUEST, f"The draft model failed to load: {exc}"
            ) from exc
        self.name = draft.model_path
        self.known: list[int] = []  # the tokens in its cache
        self.synced = 0  # of those, how many the reply's history is known to share

    def start(self, prompt: Sequence[int]) -> None:
        """A new reply: find how much of the prompt its cache already holds (once)."""
        self.synced = common_prefix(self.known, prompt)

    def draft(self, history: Sequence[int], k: int) -> list[int]:
        """Up to ``k`` greedy tokens after ``history`` (its own cache kept in step; only
        the tokens since the last call are compared, not the whole history)."""
        start = min(self.synced, len(history) - 1)
        same = min(start + common_prefix(self.known[start:], history[start:]), len(history) - 1)
        if same < len(self.known):
            drop_kv_after(self.llm, same)
            self.llm.n_tokens = same
            del self.known[same:]
        self.llm.eval(list(history[same:]))
        self.known.extend(history[same:])
        self.synced = len(history)
        out: list[int] = []
        room = self.llm.n_ctx() - self.llm.n_tokens - 1
        for _ in range(min(k, room)):
            logits = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
            token = int(np.argmax(np.ctypeslib.as_array(logits, shape=(self.llm.n_vocab(),))))
            out.append(token)
            self.llm.eval([token])
            self.known.append(token)
        return out

    def close(self) -> None:
        self.llm.close()
