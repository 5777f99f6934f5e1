"""The set-up's llama.cpp gives a batch's rows exactly the logits of single steps, on
the real models: the ground speculation's greedy identity stands on.

Each case evaluates a long prompt (past the 512 cells where flash attention used
to split the cache for one query), then five tokens one step at a time, then the
same five in one batch, and compares every logit. Gemma's Q4_K weights are
repacked (the gemm/gemv pair); the demo's Q4_1 and the F16 attention product take
llamafile's path without flash attention.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import pytest

from vllmchat.core.engine import llama_adapter
from vllmchat.core.machine import batch_invariant

TEXT = (
    "The river runs past the mill, under the old stone bridge, and out to the sea. "
    "Every spring the water rises and the miller counts the sacks of grain. "
) * 18


def _logits(llm: llama_cpp.Llama, row: int) -> list[float]:
    data = llama_cpp.llama_get_logits_ith(llm.ctx, row)
    return list(ctypes.cast(data, ctypes.POINTER(ctypes.c_float))[: llm.n_vocab()])


def _largest_difference(model: str, *, flash_attn: bool) -> tuple[int, float]:
    llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_threads=2, flash_attn=flash_attn,
                          verbose=False)  # fmt: skip
    try:
        prompt = llm.tokenize(TEXT.encode(), add_bos=True)
        tail = llm.tokenize(b" The miller smiles at the rising water", add_bos=False)[:5]
        singles = []
        llm.eval(prompt)
        for token in tail:
            llm.eval([token])
            singles.append(_logits(llm, -1))
        assert llama_adapter.drop_kv_after(llm, len(prompt))
        llm.n_tokens = len(prompt)
        llama_adapter.decode_all_logits(llm, tail)
        batch = [_logits(llm, i) for i in range(len(tail))]
        worst = max(abs(a - b) for s, b_row in zip(singles, batch, strict=True)
                    for a, b in zip(s, b_row, strict=True))  # fmt: skip
        return len(prompt), worst
    finally:
        llm.close()


def test_the_build_is_marked_batch_invariant():
    assert llama_adapter.batch_invariant_cpu(), "scripts/setup.sh builds the patched llama.cpp"


@pytest.mark.parametrize("flash_attn", [False, True])
@pytest.mark.parametrize("which", ["demo_model", "gemma_model"])
def test_a_batch_gives_its_rows_the_logits_of_single_steps(which, flash_attn, request):
    cached, worst = _largest_difference(str(request.getfixturevalue(which)),
                                        flash_attn=flash_attn)  # fmt: skip
    assert cached > 512
    assert worst == 0.0


def test_the_patch_refuses_a_source_it_does_not_know(tmp_path):
    for edit in batch_invariant.EDITS:
        path = tmp_path / edit.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// another llama.cpp\n")
    with pytest.raises(batch_invariant.PatchError, match="needs new edits"):
        batch_invariant.apply(tmp_path)
    assert not (tmp_path / batch_invariant.MARKER_MODULE).exists()
