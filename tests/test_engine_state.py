"""Live reload, KV state export/import, and exactness of a restored state."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import GREEDY, done, run_turn, stats_of
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.settings import LoadSettings


@pytest.fixture
def gemma_settings(gemma_client, gemma_model) -> LoadSettings:
    """The settings ``gemma_client`` was loaded with (its caller keeps them, not the client)."""
    settings = LoadSettings(model_path=str(gemma_model), n_ctx=2048, n_threads=2)
    assert gemma_client.info.n_ctx == settings.n_ctx
    return settings


def _chat(client, turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You answer in one sentence."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Tell me fact number {i} about rivers."})
        reply, events = run_turn(client, messages)
        done(events)
        messages.append({"role": "assistant", "content": reply})
    return messages


def test_live_reload_keeps_the_kv_cache(gemma_client, gemma_settings):
    messages = _chat(gemma_client, 3)
    kv_before = gemma_client.kv().kv_tokens
    settings = gemma_settings.with_changes(n_gpu_layers=1, n_threads=1)
    result = gemma_client.reload(settings)
    assert result.restored, result.reason
    assert result.tokens == kv_before
    assert gemma_client.info == result.info
    messages.append({"role": "user", "content": "One more."})
    _, events = run_turn(gemma_client, messages)
    stats = stats_of(events)
    assert stats.tokens_reused == kv_before
    assert stats.tokens_prefilled == stats.tokens_new < 20


def test_reload_to_a_smaller_context_reprefills_and_says_why(gemma_client, gemma_settings):
    messages = _chat(gemma_client, 2)
    used = gemma_client.kv().kv_tokens
    result = gemma_client.reload(gemma_settings.with_changes(n_ctx=64))
    assert not result.restored
    assert "smaller" in result.reason and str(used) in result.reason
    result = gemma_client.reload(gemma_settings.with_changes(n_ctx=1024))
    assert result.restored and result.tokens == 0
    messages.append({"role": "user", "content": "Go on."})
    _, events = run_turn(gemma_client, messages)
    stats = stats_of(events)
    assert stats.tokens_reused == 0 and stats.tokens_prefilled == stats.prompt_tokens


def test_reload_with_another_kv_type_reprefills_and_says_why(gemma_client, gemma_settings):
    _chat(gemma_client, 1)
    result = gemma_client.reload(gemma_settings.with_changes(type_k="q8_0"))
    assert not result.restored
    assert "KV cache type" in result.reason


def test_exported_state_restores_and_is_bound_to_model_and_settings(
    make_client, gemma_client, gemma_settings, tiny_models, tmp_path
):
    messages = _chat(gemma_client, 2)
    path = tmp_path / "conv.kv"
    exported = gemma_client.export_state(str(path))
    assert exported.tokens > 50 and path.stat().st_size == exported.bytes

    fresh = make_client()
    fresh.load(gemma_settings.with_changes(n_threads=1))
    assert fresh.import_state(str(path)).tokens == exported.tokens
    messages.append({"role": "user", "content": "Thanks."})
    _, events = run_turn(fresh, messages)
    stats = stats_of(events)
    assert stats.tokens_reused == exported.tokens

    other_settings = make_client()
    other_settings.load(gemma_settings.with_changes(type_k="q8_0"))
    with pytest.raises(EngineError) as info:
        other_settings.import_state(str(path))
    assert info.value.kind == ErrorKind.STATE_MISMATCH and "type_k" in info.value.message

    other_model = make_client()
    other_model.load(LoadSettings(model_path=str(tiny_models["chatml"]), n_ctx=2048))
    with pytest.raises(EngineError) as info:
        other_model.import_state(str(path))
    assert "model" in info.value.message

    damaged = tmp_path / "damaged.kv"
    damaged.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(EngineError, match="damaged"):
        fresh.import_state(str(damaged))


def _next_logits(runtime, token: int) -> np.ndarray:
    import llama_cpp

    runtime.decode([token])
    ptr = llama_cpp.llama_get_logits_ith(runtime.llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(runtime.llm.n_vocab(),)).copy()


@pytest.mark.parametrize("n_tokens", [300, 1100, 1700])
def test_restored_state_gives_bit_identical_logits_on_a_llama_model(tiny_models, n_tokens):
    """On a model without sliding-window attention, restore is exact."""
    from vllmchat.core.engine.process.inference.runtime import LlamaRuntime

    settings = LoadSettings(model_path=str(tiny_models["chatml"]), n_ctx=2048, n_threads=2)
    tokens = [int(t) for t in np.random.default_rng(n_tokens).integers(3, 400, n_tokens)]
    a = LlamaRuntime(settings)
    a.decode(tokens)
    data, saved = a.save_state()
    expected = _next_logits(a, 300)
    a.close()
    b = LlamaRuntime(settings)
    assert b.restore_state(data, saved)
    got = _next_logits(b, 300)
    b.close()
    assert np.array_equal(got, expected)


def test_greedy_reply_after_restore_matches_on_the_demo_model(
    gemma_client, gemma_settings, make_client, tmp_path
):
    """Gemma's sliding-window cache restores with the same argmax (docs/internals.md)."""
    messages = _chat(gemma_client, 2)
    path = tmp_path / "s.kv"
    gemma_client.export_state(str(path))
    messages.append({"role": "user", "content": "And the longest river?"})
    expected, _ = run_turn(gemma_client, messages, GREEDY)
    fresh = make_client()
    fresh.load(gemma_settings)
    fresh.import_state(str(path))
    got, _ = run_turn(fresh, messages, GREEDY)
    assert got == expected
