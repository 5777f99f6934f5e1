"""``vllmchat bench engine``: the engine path against raw llama-cpp-python, in one run."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from vllmchat.core.app.engines import open_local
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, StatsEvent
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.engine.process.llama.llama_adapter import drop_kv_after
from vllmchat.core.settings import LoadSettings, SamplingSettings, SpeculationMode

DECODE_TOKENS = 128
PROMPT = "Write a long story about a lighthouse keeper and the sea."
QUESTIONS = [
    "What is a good name for a cat?",
    "How do bees make honey?",
    "Why is the sky blue?",
    "Give me a tip for learning to cook.",
    "What is the tallest mountain?",
    "Describe a rainy day in one line.",
    "Which planets have rings?",
    "How do plants drink?",
    "What makes bread rise?",
    "Name a famous painter.",
    "What is a prime number?",
    "How far is the moon?",
    "Why do cats purr?",
    "What is a haiku?",
    "How do rivers form?",
    "Suggest a weekend hobby.",
    "What is gravity?",
    "How do compasses work?",
    "Tell me about octopuses.",
    "What is the speed of sound?",
]


def _raw_decode_tps(settings: LoadSettings, n: int) -> float:
    """Decode tokens/s of plain in-process llama-cpp-python, greedy, same settings."""
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=settings.model_path,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        n_threads_batch=settings.n_threads,
        n_batch=settings.n_batch,
        n_gpu_layers=settings.placement.n_gpu_layers,
        flash_attn=settings.flash_attn,
        swa_full=settings.swa_full,
        verbose=False,
    )
    try:
        tokens = llm.tokenize(PROMPT.encode(), add_bos=True, special=False)
        times = []
        for i, _token in enumerate(llm.generate(tokens, temp=0.0, repeat_penalty=1.0)):
            times.append(time.perf_counter())
            if i + 1 == n:
                break
        return (n - 1) / (times[-1] - times[0])
    finally:
        llm.close()


def _turn(
    client: EngineClient, messages: list[dict[str, str]], sampling: SamplingSettings
) -> tuple[str, Any]:
    stats = None
    for event in client.chat(messages, sampling):
        if isinstance(event, StatsEvent):
            stats = event.stats
        elif isinstance(event, ErrorEvent):
            raise RuntimeError(f"turn failed: {event.message}")
        elif isinstance(event, DoneEvent):
            return event.text, stats
    raise RuntimeError("turn ended without Done")


def _engine_decode_tps(client: EngineClient, n: int, speculation: SpeculationMode = "off") -> float:
    """Decode tokens/s through the engine, greedy; speculation off unless asked."""
    sampling = SamplingSettings(
        temperature=0.0, repeat_penalty=1.0, max_tokens=n, ignore_eos=True, speculation=speculation
    )
    _, stats = _turn(client, [{"role": "user", "content": PROMPT}], sampling)
    return float(stats.decode_tok_s)


def _decode_figures(client: EngineClient, settings: LoadSettings, rounds: int) -> dict[str, Any]:
    """Decode speed through the engine against raw llama-cpp-python (each round runs all
    three in turn). ``decode_ratio`` is with speculation off: the cost of the process
    and the pipe alone; ``decode_ratio_auto`` with the default (``auto``), which can
    exceed 1 where guessed tokens are accepted."""
    raw, off, auto = [], [], []
    for _ in range(rounds):
        raw.append(_raw_decode_tps(settings, DECODE_TOKENS))
        off.append(_engine_decode_tps(client, DECODE_TOKENS, "off"))
        auto.append(_engine_decode_tps(client, DECODE_TOKENS, "auto"))
    raw_tps, off_tps, auto_tps = (statistics.median(x) for x in (raw, off, auto))
    return {
        "raw_decode_tok_s": round(raw_tps, 2),
        "engine_decode_tok_s": round(off_tps, 2),
        "engine_decode_auto_tok_s": round(auto_tps, 2),
        "decode_ratio": round(off_tps / raw_tps, 4),
        "decode_ratio_auto": round(auto_tps / raw_tps, 4),
    }


def _scripted_chat(client: EngineClient) -> tuple[list[dict[str, str]], list[Any]]:
    sampling = SamplingSettings(temperature=0.0, max_tokens=64, seed=7)
    messages = [{"role": "system", "content": "You are a friendly, concise assistant."}]
    all_stats = []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        reply, stats = _turn(client, messages, sampling)
        messages.append({"role": "assistant", "content": reply})
        all_stats.append(stats)
    return messages, all_stats


LONG_CHAT_TURNS = 100
WINDOW = 5  # turns compared at each end: the same questions, so the same new tokens


def _long_chat_ttft(client: EngineClient) -> dict[str, Any]:
    """Time to first token over a 100-turn chat: does it grow with the history?"""
    sampling = SamplingSettings(temperature=0.0, max_tokens=16, seed=7)
    messages = [{"role": "system", "content": "You are a friendly, concise assistant."}]
    ttft = []
    for turn in range(LONG_CHAT_TURNS):
        early = turn - 1 if 1 <= turn <= WINDOW else None
        late = turn - (LONG_CHAT_TURNS - WINDOW) if turn >= LONG_CHAT_TURNS - WINDOW else None
        index = early if early is not None else late if late is not None else turn
        messages.append({"role": "user", "content": QUESTIONS[index % len(QUESTIONS)]})
        reply, stats = _turn(client, messages, sampling)
        messages.append({"role": "assistant", "content": reply})
        ttft.append(stats.ttft_s)
    first = statistics.median(ttft[1 : 1 + WINDOW])
    last = statistics.median(ttft[-WINDOW:])
    return {
        "long_chat_turns": LONG_CHAT_TURNS,
        "long_chat_kv_tokens": client.kv().kv_tokens,
        "ttft_turn2_ms_long": round(first * 1000, 1),
        "ttft_turn100_ms": round(last * 1000, 1),
        "ttft_ratio_turn100_turn2": round(last / first, 4),
    }


def _raw_prefill_growth(settings: LoadSettings, early_kv: int, late_kv: int, n: int = 16) -> float:
    """How much llama.cpp's own prefill of ``n`` tokens slows from ``early_kv`` cached
    tokens to ``late_kv`` (raw llama-cpp-python, same settings): the floor under any
    time-to-first-token ratio."""
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=settings.model_path,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads,
        n_threads_batch=settings.n_threads,
        n_batch=settings.n_batch,
        n_gpu_layers=settings.placement.n_gpu_layers,
        flash_attn=settings.flash_attn,
        swa_full=settings.swa_full,
        verbose=False,
    )
    tokens = [(i * 7919) % 20000 + 300 for i in range(late_kv + n)]
    try:
        times = {}
        for kv in (early_kv, late_kv):
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
            llm.n_tokens = 0
            llm.eval(tokens[:kv])
            runs = []
            for _ in range(5):
                drop_kv_after(llm, kv)
                llm.n_tokens = kv
                t0 = time.perf_counter()
                llm.eval(tokens[kv : kv + n])
                runs.append(time.perf_counter() - t0)
            times[kv] = statistics.median(runs)
        return times[late_kv] / times[early_kv]
    finally:
        llm.close()


def _grow(client: EngineClient, messages: list[dict[str, str]], min_tokens: int) -> None:
    sampling = SamplingSettings(temperature=0.0, max_tokens=96, ignore_eos=True)
    i = 0
    while client.kv().kv_tokens < min_tokens:
        messages.append({"role": "user", "content": f"Continue the story, part {i}."})
        reply, _ = _turn(client, messages, sampling)
        messages.append({"role": "assistant", "content": reply})
        i += 1


def run(*, model: str | None = None, quick: bool = False) -> dict[str, Any]:
    from vllmchat.core.demo_model import gemma_model_path

    settings = LoadSettings(model_path=model or str(gemma_model_path()), n_ctx=4096, n_threads=2)
    client = open_local()
    result: dict[str, Any] = {"model": Path(settings.model_path).name}
    try:
        t0 = time.perf_counter()
        client.load(settings)
        cold_load_s = time.perf_counter() - t0

        result.update(_decode_figures(client, settings, 2 if quick else 3))

        runs = []
        for _ in range(1 if quick else 3):
            client.load(settings)  # a clean cache for each scripted chat
            messages, stats = _scripted_chat(client)
            runs.append(stats)
        ratios = [s.tokens_prefilled / max(1, s.tokens_new) for run in runs for s in run[1:]]
        ttft = [statistics.median(run[i].ttft_s for run in runs) for i in range(len(stats))]
        result["turns"] = len(stats)
        result["prefill_per_new_token_max"] = round(max(ratios), 4)
        result["prefilled_tokens"] = sum(s.tokens_prefilled for s in stats)
        result["stateless_prefill_tokens"] = sum(s.prompt_tokens for s in stats)
        result["ttft_turn2_ms"] = round(ttft[1] * 1000, 1)
        result["ttft_turn20_ms"] = round(ttft[-1] * 1000, 1)
        result["ttft_ratio_turn20_turn2"] = round(ttft[-1] / ttft[1], 4)

        long_settings = settings.with_changes(n_ctx=8192)
        client.load(long_settings)
        result.update(_long_chat_ttft(client))
        growth = _raw_prefill_growth(long_settings, 150, result["long_chat_kv_tokens"])
        result["raw_prefill_ratio_same_kv"] = round(growth, 4)
        result["ttft_growth_beyond_raw"] = round(result["ttft_ratio_turn100_turn2"] / growth, 4)
        client.load(settings)  # the scripted chat's history is read again by the first turn
        _grow(client, messages, 1500)
        result.update(_reload_figures(client, settings, messages))
        t0 = time.perf_counter()
        client.load(settings)
        cold_load_s = min(cold_load_s, time.perf_counter() - t0)
        result["cold_load_s"] = round(cold_load_s, 4)
        result["reload_time_ratio"] = round(result["reload_s"] / cold_load_s, 4)
        result.update(_restore_figures(client, settings, messages))
    finally:
        client.close()
    return result


def _reload_figures(
    client: EngineClient,
    settings: LoadSettings,
    messages: list[dict[str, str]],
    **changes: Any,
) -> dict[str, Any]:
    """Reload a long conversation live with ``changes`` (default: one GPU layer), then
    count history tokens prefilled again."""
    kv = client.kv().kv_tokens
    t0 = time.perf_counter()
    reload = client.reload(settings.with_changes(**(changes or {"n_gpu_layers": 1})))
    reload_s = time.perf_counter() - t0
    turn = [*messages, {"role": "user", "content": "Thank you."}]
    _, stats = _turn(client, turn, SamplingSettings(temperature=0.0, max_tokens=8))
    return {
        "reload_history_tokens": kv,
        "reload_restored": reload.restored,
        "reload_reprefilled_tokens": stats.tokens_prefilled - stats.tokens_new,
        "reload_s": round(reload_s, 4),
    }


def _restore_figures(
    client: EngineClient, settings: LoadSettings, messages: list[dict[str, str]]
) -> dict[str, Any]:
    """Import a >= 2,000-token state against re-prefilling the same tokens."""
    client.load(settings)
    _grow(client, messages, 2000)
    n = client.kv().kv_tokens
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "state.kv")
        exported = client.export_state(path)
        client.load(settings)
        t0 = time.perf_counter()
        client.import_state(path)
        import_s = time.perf_counter() - t0
    client.load(settings)
    _, stats = _turn(client, messages[:-1], SamplingSettings(temperature=0.0, max_tokens=1))
    return {
        "state_tokens": n,
        "state_mib": round(exported.bytes / 2**20, 1),
        "state_import_s": round(import_s, 4),
        "reprefill_s": round(stats.prefill_s, 4),
        "state_restore_ratio": round(import_s / stats.prefill_s, 4),
    }
