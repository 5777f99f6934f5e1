"""KV reuse across turns, stop during decode and prefill, context limits (real model)."""

from __future__ import annotations

import threading
import time

from tests.helpers import GREEDY, done, error, run_turn, stats_of
from vllmchat.core.engine.events import ErrorKind, TokenEvent
from vllmchat.core.settings import SamplingSettings

SYSTEM = {"role": "system", "content": "You are a concise assistant. Answer briefly."}


def test_each_turn_prefills_only_the_new_tokens(gemma_client):
    messages = [SYSTEM, {"role": "user", "content": "Name three colours."}]
    reply, events = run_turn(gemma_client, messages)
    first = stats_of(events)
    assert first.tokens_reused == 0
    assert first.tokens_prefilled == first.prompt_tokens
    previous_kv = gemma_client.kv().kv_tokens
    assert previous_kv == first.prompt_tokens + first.decode_tokens
    for question in ("And three animals?", "And three cities in Europe?"):
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": question}]
        reply, events = run_turn(gemma_client, messages)
        stats = stats_of(events)
        assert stats.tokens_reused == previous_kv, "the whole cached history is reused"
        assert stats.tokens_prefilled == stats.tokens_new
        assert stats.tokens_prefilled < 30 < stats.tokens_reused
        assert stats.prompt_tokens == stats.tokens_reused + stats.tokens_prefilled
        assert stats.ttft_s > 0 and stats.prefill_s > 0
        previous_kv = gemma_client.kv().kv_tokens


def test_stop_mid_decode_ends_within_a_token_and_cache_stays_usable(gemma_client):
    messages = [SYSTEM, {"role": "user", "content": "Count from one to five hundred."}]
    # One token per step (drafts arrive in bursts; test_speculative stops mid-draft).
    long_reply = SamplingSettings(
        temperature=0.0, max_tokens=400, ignore_eos=True, speculation="off"
    )
    events = []
    for event in gemma_client.chat(messages, long_reply):
        events.append(event)
        if sum(isinstance(e, TokenEvent) for e in events) == 5:
            threading.Thread(target=gemma_client.stop).start()
    last = done(events)
    assert last.stop_reason == "stopped"
    assert 5 <= last.stats.decode_tokens <= 7
    messages += [{"role": "assistant", "content": last.text}, {"role": "user", "content": "Ok."}]
    _, events = run_turn(gemma_client, messages)
    stats = stats_of(events)
    assert stats.tokens_reused >= last.stats.prompt_tokens
    assert stats.tokens_prefilled == stats.tokens_new


def test_stop_interrupts_a_long_prefill(gemma_client):
    long_text = " ".join(f"item {i} is blue." for i in range(120))  # ~950 tokens
    messages = [SYSTEM, {"role": "user", "content": long_text + " What colour is item 7?"}]
    timer = threading.Timer(0.5, gemma_client.stop)
    timer.start()
    t0 = time.perf_counter()
    _, events = run_turn(gemma_client, messages)
    elapsed = time.perf_counter() - t0
    timer.join()
    last = done(events)
    assert last.stop_reason == "stopped"
    assert last.stats.decode_tokens == 0
    assert last.stats.kv_tokens < last.stats.prompt_tokens, "stopped before the prefill ended"
    assert elapsed < 4.0, f"stop took effect late ({elapsed:.1f}s)"
    # The cache is consistent: the same turn again reuses what was computed and
    # gives the same reply as an engine that was never interrupted.
    resumed, events = run_turn(gemma_client, messages, GREEDY)
    stats = stats_of(events)
    assert stats.tokens_reused == last.stats.kv_tokens
    assert stats.tokens_reused + stats.tokens_prefilled == stats.prompt_tokens
    assert resumed


def test_prompt_longer_than_context_is_refused_clearly(gemma_client):
    huge = "word " * 5000
    _, events = run_turn(gemma_client, [{"role": "user", "content": huge}])
    err = error(events)
    assert err.kind == ErrorKind.PROMPT_TOO_LONG
    assert "2,048" in err.message and "tokens" in err.message
    _reply, events = run_turn(gemma_client, [{"role": "user", "content": "Hello"}])
    done(events)


def test_abandoned_stream_is_stopped_and_the_engine_serves_the_next_turn(gemma_client):
    messages = [{"role": "user", "content": "Tell me a long story."}]
    stream = gemma_client.chat(messages, SamplingSettings(max_tokens=300, ignore_eos=True))
    for i, _event in enumerate(stream):
        if i == 3:
            break
    stream.close()
    _, events = run_turn(gemma_client, messages)
    done(events)


def test_requests_from_two_threads_queue(gemma_client):
    results: dict[str, str] = {}

    def ask(name: str) -> None:
        _, events = run_turn(gemma_client, [{"role": "user", "content": f"Say {name}."}])
        results[name] = type(events[-1]).__name__

    threads = [threading.Thread(target=ask, args=(n,)) for n in ("one", "two", "three")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {"one": "DoneEvent", "two": "DoneEvent", "three": "DoneEvent"}
