"""Each use of llama-cpp-python's internals, on the real demo model: an upgrade that
changes one fails here, by name."""

from __future__ import annotations

import llama_cpp
import pytest

from vllmchat.core.engine.process.llama import llama_adapter
from vllmchat.core.engine.process.llama.overrides import OverrideList, cpu_buffer_type
from vllmchat.core.settings import SamplingSettings


@pytest.fixture(scope="module")
def llm(demo_model):
    model = llama_cpp.Llama(model_path=str(demo_model), n_ctx=256, n_threads=2, verbose=False)
    yield model
    model.close()


def test_every_internal_is_there(llm):
    assert llama_adapter.missing(llm) == []


def test_sampler_and_next_token(llm):
    llm.reset()
    llm.eval(llm.tokenize(b"The capital of France is", add_bos=True))
    greedy = SamplingSettings(temperature=0.0)
    token = llama_adapter.sample_next(llm, llama_adapter.sampler_for(llm, greedy))
    assert 0 <= token < llm.n_vocab()
    again = llama_adapter.sample_next(llm, llama_adapter.sampler_for(llm, greedy))
    assert again == token  # greedy is deterministic


def test_drop_kv_after(llm):
    llm.reset()
    llm.eval(llm.tokenize(b"one two three four five six", add_bos=True))
    assert llama_adapter.drop_kv_after(llm, 3)
    mem = llama_cpp.llama_get_memory(llm.ctx)
    assert llama_cpp.llama_memory_seq_pos_max(mem, 0) == 2


def test_loader_overrides_reach_the_model_parameters():
    overrides = OverrideList([r"blk\.0\.ffn_up"], cpu_buffer_type())
    defaults = llama_cpp.llama_cpp.llama_model_default_params  # what Llama() calls
    with llama_adapter.loader_overrides(overrides.address):
        params = llama_cpp.llama_cpp.llama_model_default_params()
    assert params.tensor_buft_overrides == overrides.address
    assert llama_cpp.llama_cpp.llama_model_default_params is defaults  # put back
    assert defaults().tensor_buft_overrides in (None, 0)


def _greedy_picks(llm, fast, chain, prompt: bytes, n: int) -> list[tuple[int, int]]:
    """Both samplers' picks on the logits of every step of one greedy reply of ``n``
    tokens (each sampler keeps its own penalty history; the reply follows the chain)."""
    llm.reset()
    llm.eval(llm.tokenize(prompt, add_bos=True))
    picks = []
    for _ in range(n):
        picks.append((llama_adapter.sample_next(llm, fast), llama_adapter.sample_next(llm, chain)))
        llm.eval([picks[-1][1]])
    return picks


@pytest.mark.parametrize("penalty", [1.1, 1.0, 1.5])
@pytest.mark.parametrize("which", ["demo_model", "gemma_model"])
def test_the_greedy_pick_on_the_logits_is_the_chains(which, penalty, request):
    """The repeat penalty changes the pick often over 120 tokens of a list."""
    from vllmchat.core.engine.process.llama.greedy import GreedySampler

    path = str(request.getfixturevalue(which))
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=2, verbose=False)
    try:
        prompt = b"Count on: one two three one two three one two"
        sampling = SamplingSettings(temperature=0.0, repeat_penalty=penalty)
        fast = llama_adapter.sampler_for(llm, sampling)
        assert isinstance(fast, GreedySampler)
        chain = llm._init_sampler(temp=0.0, repeat_penalty=penalty)
        picks = _greedy_picks(llm, fast, chain, prompt, 120)
        assert [f for f, _ in picks] == [c for _, c in picks]
    finally:
        llm.close()
