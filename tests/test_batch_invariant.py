"""The set-up's llama.cpp gives a batch's rows exactly the logits of single steps, on
the real models: the ground speculation's greedy identity stands on.

Each case evaluates a prompt (600 tokens: past the 512 cells where flash attention
used to split the cache for one query; 252: the batch crosses the 256-cell step in
which the attended cache grows), then seven tokens (the most one verify holds) one
step at a time, then the same seven in one batch, and compares every logit.
Gemma's Q4_K weights are repacked (the gemm/gemv pair); the demo's Q4_1 and the
F16 attention product take llamafile's path without flash attention. The CUDA
kernels are measured on a GPU with ``python -m vllmchat.bench.engine.batch_invariance``.
"""

from __future__ import annotations

import pytest

from vllmchat.bench.engine import batch_invariance
from vllmchat.core.engine.exactness import (
    BuildMarker,
    KernelSetup,
    exactness,
    identity_note,
)
from vllmchat.core.engine.process.llama import llama_adapter
from vllmchat.setup import batch_invariant

VERIFY_ROWS_EXACT = batch_invariant.VERIFY_ROWS_EXACT


def test_the_build_is_marked_batch_invariant_with_its_verify_limits():
    marker = llama_adapter.batch_invariant_build()
    assert marker == BuildMarker(frozenset({"cpu", "cuda", "swa_ring"}), 7, 8)


@pytest.mark.parametrize("flash_attn", [False, True])
@pytest.mark.parametrize("which", ["demo_model", "gemma_model"])
def test_a_batch_gives_its_rows_the_logits_of_single_steps(which, flash_attn, request):
    cases = ((600, VERIFY_ROWS_EXACT), (252, VERIFY_ROWS_EXACT))
    figures = batch_invariance.measure(
        str(request.getfixturevalue(which)), flash_attn=flash_attn, cases=cases
    )
    assert figures["largest_difference"] == {"600+7": 0.0, "252+7": 0.0}


def _at(**changes: object) -> KernelSetup:
    base = dict(
        gpu_layers=True,
        backends=("CUDA", "CPU"),
        flash_attn=True,
        moe=False,
        swa_ring=False,
        compute=((9, 0),),
    )
    return KernelSetup(**{**base, **changes})  # type: ignore[arg-type]


def test_exactness_names_what_breaks_it():
    """Measured on an H200 (``bench/engine/batch_invariance.py``): every logit equal with all
    layers on CUDA and flash attention; without it, up to 0.07 apart."""
    covers = BuildMarker(frozenset({"cpu", "cuda", "swa_ring"}), 7, 8)
    assert exactness(covers, _at()).exact and exactness(covers, _at()).max_batch == 7
    assert exactness(covers, _at(gpu_layers=False, flash_attn=False)).exact
    assert "flash attention" in exactness(covers, _at(flash_attn=False)).reason
    assert "Vulkan" in exactness(covers, _at(backends=("Vulkan", "CPU"))).reason
    assert "expert" in exactness(covers, _at(moe=True)).reason
    assert "Turing" in exactness(covers, _at(compute=((6, 1),))).reason
    assert "Turing" in exactness(covers, _at(compute=())).reason, "NVML could not tell"
    assert (
        "ring"
        in exactness(
            BuildMarker(frozenset({"cpu"}), 7, 8), _at(gpu_layers=False, swa_ring=True)
        ).reason
    )
    assert "not vllmchat's" in exactness(BuildMarker(), _at(gpu_layers=False)).reason


def test_the_user_is_told_only_where_greedy_output_can_differ():
    reason = "on the GPU a verify is exact with flash attention only"
    note = identity_note(False, reason, speculation="auto", temperature=0.0)
    assert "can differ" in note and reason in note
    assert not identity_note(True, "", speculation="auto", temperature=0.0)
    assert not identity_note(False, reason, speculation="off", temperature=0.0)
    assert not identity_note(False, reason, speculation="auto", temperature=0.7), "sampled"


def test_the_patch_refuses_a_source_it_does_not_know(tmp_path):
    for edit in batch_invariant.EDITS:
        path = tmp_path / edit.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// another llama.cpp\n")
    with pytest.raises(batch_invariant.PatchError, match="needs new edits"):
        batch_invariant.apply(tmp_path)
    assert not (tmp_path / batch_invariant.MARKER_MODULE).exists()
