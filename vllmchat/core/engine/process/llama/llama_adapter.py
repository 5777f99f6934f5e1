"""Every use of llama-cpp-python's private members and internals, in one place.

llama-cpp-python has no public API for sampling one token from the context's
logits with its sampler chain, for removing KV cells after a position, or for
passing ``tensor_buft_overrides`` to the loader. These functions do it through
its internals; ``missing()`` lists what an upgrade removed, and
``tests/test_llama_adapter.py`` exercises each function, so an upgrade breaks
here with a clear failure rather than deep inside a turn.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import llama_cpp
import llama_cpp.llama_cpp as llama_api
from llama_cpp.llama_grammar import LlamaGrammar

from vllmchat.core.engine.exactness import BuildMarker
from vllmchat.core.engine.process.llama.greedy import GreedySampler
from vllmchat.core.settings import SamplingSettings

REQUIRED = ((llama_cpp.Llama, "_init_sampler"), (llama_api, "llama_model_default_params"))
REQUIRED_ON_A_MODEL = ("_ctx", "_batch")  # set by ``Llama.__init__``


def missing(llm: llama_cpp.Llama | None = None) -> list[str]:
    """The internals this module relies on that this llama-cpp-python lacks (those of
    a loaded model too, when one is given)."""
    out = [f"{getattr(owner, '__name__', owner)}.{name}" for owner, name in REQUIRED
           if not hasattr(owner, name)]  # fmt: skip
    if llm is not None:
        out += [f"Llama().{name}" for name in REQUIRED_ON_A_MODEL if not hasattr(llm, name)]
    return out


def sampler_for(
    llm: llama_cpp.Llama,
    sampling: SamplingSettings,
    json_schema: str | None = None,
    gbnf: str | None = None,
) -> Any:
    """llama-cpp-python's sampler chain for these settings (temperature 0: the same
    greedy pick, computed on the logits, ``greedy.py``); with ``json_schema`` or a
    GBNF grammar, the chain applies llama.cpp's grammar (a constrained tool call)."""
    grammar = None
    if json_schema:
        grammar = LlamaGrammar.from_json_schema(json_schema, verbose=False)
    elif gbnf:
        grammar = LlamaGrammar.from_string(gbnf, verbose=False)
    elif sampling.temperature == 0.0:
        return GreedySampler(llm, sampling.repeat_penalty)
    return llm._init_sampler(
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        min_p=sampling.min_p,
        temp=sampling.temperature,
        repeat_penalty=sampling.repeat_penalty,
        grammar=grammar,
    )


def sample_next(llm: llama_cpp.Llama, sampler: Any) -> int:
    """The next token from the logits of the last evaluated position."""
    token: int = sampler.sample(llm._ctx, -1)
    return token


def sample_at(llm: llama_cpp.Llama, sampler: Any, index: int) -> int:
    """A token from the logits of the ``index``-th position of the last batch (the
    sampler accepts it, as after ``sample_next``)."""
    token: int = sampler.sample(llm._ctx, index)
    return token


def decode_all_logits(llm: llama_cpp.Llama, tokens: list[int]) -> None:
    """Evaluate ``tokens`` (one batch, at most ``n_batch``) keeping the logits of every
    one of them, not of the whole context (``Llama.eval`` keeps the last only)."""
    llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
    n_past = llm.n_tokens
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past : n_past + len(tokens)] = tokens
    llm.n_tokens += len(tokens)


def drop_kv_after(llm: llama_cpp.Llama, n_keep: int) -> bool:
    """Remove the KV cells of every position from ``n_keep`` on (False: refused)."""
    return bool(llm._ctx.kv_cache_seq_rm(-1, n_keep, -1))


@contextlib.contextmanager
def loader_overrides(address: int | None) -> Iterator[None]:
    """While a ``llama_cpp.Llama`` is built, its model parameters carry the
    ``tensor_buft_overrides`` array at ``address`` (llama-cpp-python never sets it)."""
    if not address:
        yield
        return
    original = llama_api.llama_model_default_params

    def patched() -> Any:
        params = original()
        params.tensor_buft_overrides = address
        return params

    llama_api.llama_model_default_params = patched
    try:
        yield
    finally:
        llama_api.llama_model_default_params = original


def batch_invariant_build() -> BuildMarker:
    """The marker module vllmchat's set-up writes into its llama.cpp build
    (``setup/batch_invariant.py``); an empty one for any other build."""
    try:
        marker = importlib.import_module("llama_cpp._vllmchat_build")
    except ImportError:
        return BuildMarker()
    return BuildMarker(
        covers=frozenset(str(c) for c in marker.COVERS),
        verify_rows_exact=int(marker.VERIFY_ROWS_EXACT),
        verify_rows_gpu=int(marker.VERIFY_ROWS_GPU),
    )
