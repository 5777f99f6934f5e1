"""A model is warmed up at load, as llama-server does: one decode, then an empty cache."""

from __future__ import annotations

from pathlib import Path

import llama_cpp

from vllmchat.core.settings import LoadSettings


def test_a_loaded_model_has_decoded_once_and_holds_no_cells(demo_model: Path) -> None:
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime

    rt = LlamaRuntime(LoadSettings(model_path=str(demo_model), n_ctx=256, api_slots=1))
    try:
        ctx = rt.llm.ctx
        assert llama_cpp.llama_perf_context(ctx).n_p_eval == 2  # the warm-up: BOS and EOS
        memory = llama_cpp.llama_get_memory(ctx)
        for seq in (0, 1):
            assert llama_cpp.llama_memory_seq_pos_max(memory, seq) == -1
        assert rt.llm.n_tokens == 0 and rt.kv_tokens == []
        prompt = rt.tokenize("The river runs", special=False)
        rt.decode(prompt)  # the first turn starts at position 0
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == len(prompt) - 1
    finally:
        rt.close()
