"""Next-token quality of a model on a fixed text, as llama.cpp's ``perplexity`` tool
measures it (runs inside the engine process).

The text's tokens are split into chunks of ``n_ctx``; each chunk is evaluated
from an empty cache (its first token replaced by BOS where the model adds one)
and its second half is scored: perplexity of the true next tokens and, against
a reference model's saved log-probabilities, the KL divergence of the
next-token distributions and how often both put the same token first
(``--kl-divergence``'s "Mean KLD" and "Same top p").
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import llama_cpp  # before numpy (see runtime)
import numpy as np

from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.info import ScoreRequest, TextScore
from vllmchat.core.engine.model_check import check_model_file


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    out: np.ndarray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return out


def _open_model(req: ScoreRequest) -> llama_cpp.Llama:
    check_model_file(req.model_path)
    try:
        return llama_cpp.Llama(
            model_path=req.model_path,
            n_ctx=req.n_ctx,
            n_batch=req.n_ctx,
            n_ubatch=min(req.n_ctx, 512),
            n_gpu_layers=req.n_gpu_layers,
            n_threads=req.n_threads,
            n_threads_batch=req.n_threads,
            logits_all=True,
            verbose=False,
        )
    except (ValueError, RuntimeError, MemoryError) as exc:
        raise EngineError(ErrorKind.OOM_LOAD, f"Could not load {req.model_path}: {exc}") from exc


def score_model(req: ScoreRequest, should_stop: Callable[[], bool]) -> TextScore:
    """Perplexity (and KLD / top-1 agreement against ``req.reference``)."""
    t0 = time.perf_counter()
    llm = _open_model(req)
    try:
        n_ctx = req.n_ctx
        n_chunks = len(req.tokens) // n_ctx
        if n_chunks < 1:
            raise EngineError(
                ErrorKind.INTERNAL, f"The text has {len(req.tokens)} tokens; need {n_ctx}."
            )
        first = n_ctx // 2
        n_vocab = llm.n_vocab()
        per_chunk = n_ctx - first - 1
        add_bos = bool(
            llama_cpp.llama_vocab_get_add_bos(llama_cpp.llama_model_get_vocab(llm.model))
        )
        ref = np.load(req.reference, mmap_mode="r") if req.reference else None
        ref_top = np.load(req.reference + ".top1.npy") if req.reference else None
        if ref is not None and ref.shape != (n_chunks * per_chunk, n_vocab):
            raise EngineError(
                ErrorKind.STATE_MISMATCH,
                "The reference was made with another vocabulary or text: compare quants "
                "of the same model.",
            )
        save = (
            np.lib.format.open_memmap(
                req.save_reference,
                mode="w+",
                dtype=np.float16,
                shape=(n_chunks * per_chunk, n_vocab),
            )
            if req.save_reference
            else None
        )
        tops = np.zeros(n_chunks * per_chunk, dtype=np.int64)
        nll, klds, same = 0.0, [], 0
        for c in range(n_chunks):
            if should_stop():
                raise EngineError(ErrorKind.INTERNAL, "aborted")
            chunk = list(req.tokens[c * n_ctx : (c + 1) * n_ctx])
            if add_bos:
                chunk[0] = llm.token_bos()
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
            llm.n_tokens = 0
            llm.eval(chunk)
            logits = np.asarray(llm.scores[first : n_ctx - 1], dtype=np.float32)
            logp = _log_softmax(logits).astype(np.float16)  # as stored: comparisons are exact
            rows = slice(c * per_chunk, (c + 1) * per_chunk)
            truth = np.asarray(req.tokens[c * n_ctx + first + 1 : (c + 1) * n_ctx])
            nll -= float(logp[np.arange(per_chunk), truth].astype(np.float64).sum())
            tops[rows] = logits.argmax(axis=1)
            if save is not None:
                save[rows] = logp
            if ref is not None and ref_top is not None:
                ref_logp = np.asarray(ref[rows], dtype=np.float32)
                cur = logp.astype(np.float32)
                kld = (np.exp(ref_logp) * (ref_logp - cur)).sum(axis=1)
                klds.append(np.maximum(kld, 0.0))
                same += int((ref_top[rows] == tops[rows]).sum())
        if save is not None:
            save.flush()
            np.save(req.save_reference + ".top1.npy", tops)
        scored = n_chunks * per_chunk
        all_kld = np.concatenate(klds) if klds else None
        return TextScore(
            tokens_scored=scored,
            perplexity=math.exp(nll / scored),
            kld_mean=float(all_kld.mean()) if all_kld is not None else None,
            kld_p99=float(np.percentile(all_kld, 99)) if all_kld is not None else None,
            top1_agreement=same / scored if ref is not None else None,
            seconds=time.perf_counter() - t0,
        )
    finally:
        llm.close()


def quantize(source: str, target: str, ftype: str, n_threads: int) -> int:
    """Write ``target``: ``source`` quantized to ``ftype`` (``Q4_K_M``, ``Q8_0``, ``F16``...)
    by llama.cpp's quantizer; returns its size in bytes."""
    check_model_file(source)
    code = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype.upper()}", None)
    if code is None:
        raise EngineError(ErrorKind.BAD_REQUEST, f"Unknown quant type {ftype!r}.")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = code
    params.nthread = n_threads
    params.allow_requantize = True
    tmp = target + ".part"
    rc = llama_cpp.llama_model_quantize(source.encode(), tmp.encode(), params)
    if rc != 0:
        raise EngineError(ErrorKind.INTERNAL, f"llama.cpp could not quantize {source} ({rc}).")
    os.replace(tmp, target)
    return os.path.getsize(target)
