"""Loading a model into llama.cpp: its expert placement, the ``Llama`` itself with the
failure told apart (model or context, memory), and what the loaded model is."""

from __future__ import annotations

from typing import Any

import llama_cpp  # before numpy: the CUDA build segfaults in the other order

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.exactness import Exactness, KernelSetup, exactness
from vllmchat.core.engine.failures import classify_load_failure
from vllmchat.core.engine.process.llama import llama_adapter, llama_log
from vllmchat.core.engine.process.llama.llama_adapter import (
    context_sequences,
    loader_overrides,
)
from vllmchat.core.engine.process.llama.overrides import OverrideList, cpu_overrides
from vllmchat.core.machine import nvml
from vllmchat.core.models.description import describe
from vllmchat.core.models.hardware_probe import ggml_backends
from vllmchat.core.settings import GGML_TYPE_IDS, LoadSettings, parse_overrides


def expert_overrides(header: Any, settings: LoadSettings) -> OverrideList | None:
    """The overrides for ``n_cpu_moe`` and ``override_tensors``; ``n_cpu_moe`` is refused
    with the reason on a model without experts."""
    placement = settings.placement
    extra = parse_overrides(placement.override_tensors)
    if placement.n_cpu_moe <= 0:
        return cpu_overrides(0, 0, extra)
    desc = describe(header)
    if not desc.is_moe:
        reason = desc.moe_unplaceable_reason or (
            f"{desc.name or 'This model'} is not a mixture of experts: it has no expert "
            "tensors to keep in RAM."
        )
        raise EngineError(ErrorKind.BAD_REQUEST, f"{reason} Set n_cpu_moe to 0.")
    return cpu_overrides(placement.n_cpu_moe, desc.n_layer, extra)


def open_llama(
    settings: LoadSettings, header: Any, overrides: OverrideList | None, mark: int
) -> llama_cpp.Llama:
    """The ``Llama`` for these settings; a failure raises the engine's error with its
    stage (the model or its context) read from llama.cpp's log since ``mark``."""
    stage = "model"
    try:
        with (
            loader_overrides(overrides.address if overrides else None),
            context_sequences(settings.n_seq),
        ):
            llm = _new_llama(settings)
        warm_up(llm)
        return llm
    except MemoryError as exc:
        raise EngineError(
            ErrorKind.OOM_LOAD,
            "Not enough memory to load the model "
            f"(n_gpu_layers={settings.placement.n_gpu_layers}).",
        ) from exc
    except (ValueError, RuntimeError) as exc:
        lines = llama_log.lines_since(mark)
        if any("llama_init_from_model" in ln or "llama_context" in ln for ln in lines) or (
            "context" in str(exc).lower()
        ):
            stage = "context"
        moe = describe(header).is_moe
        raise classify_load_failure(lines, settings, stage, moe=moe) from exc


def warm_up(llm: llama_cpp.Llama) -> None:
    """One decode of BOS and EOS, then an empty cache, as llama-server does at load:
    the weights are paged in and the GPU's kernels readied then, not in the first
    reply."""
    model, ctx = llm.model, llm.ctx
    if not llama_cpp.llama_model_has_decoder(model):
        return
    vocab = llama_cpp.llama_model_get_vocab(model)
    ends = (llama_cpp.llama_vocab_bos(vocab), llama_cpp.llama_vocab_eos(vocab))
    tokens = [t for t in ends if t >= 0] or [0]
    ids = (llama_cpp.llama_token * len(tokens))(*tokens)
    llama_cpp.llama_set_warmup(ctx, True)
    try:
        llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(ids, len(tokens)))
    finally:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        llama_cpp.llama_synchronize(ctx)
        llama_cpp.llama_set_warmup(ctx, False)


def _new_llama(settings: LoadSettings) -> llama_cpp.Llama:
    split = list(settings.placement.split)
    return llama_cpp.Llama(
        model_path=settings.model_path,
        n_gpu_layers=settings.placement.n_gpu_layers,
        tensor_split=split or None,
        n_ctx=settings.n_ctx * settings.n_seq,  # each sequence holds n_ctx
        n_threads=settings.n_threads,
        n_threads_batch=settings.threads_batch,
        n_batch=settings.n_batch,
        n_ubatch=settings.n_ubatch,
        flash_attn=settings.flash_attn,
        type_k=GGML_TYPE_IDS[settings.type_k],
        type_v=GGML_TYPE_IDS[settings.type_v],
        use_mmap=settings.use_mmap,
        swa_full=settings.swa_full,
        verbose=False,
    )


def exactness_at(llm: llama_cpp.Llama, settings: LoadSettings, header: Any, gpu: bool) -> Exactness:
    """Whether this build and placement give a verify's rows single steps' logits."""
    ring = llama_cpp.llama_model_n_swa(llm.model) > 0 and not settings.swa_full
    compute = tuple(nvml.compute_capabilities()) if gpu else ()
    at = KernelSetup(
        gpu_layers=gpu,
        backends=tuple(b.name for b in ggml_backends()),
        flash_attn=settings.flash_attn,
        moe=describe(header).is_moe,
        swa_ring=ring,
        compute=compute,
    )
    return exactness(llama_adapter.batch_invariant_build(), at)
