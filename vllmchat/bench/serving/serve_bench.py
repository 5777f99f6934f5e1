"""``vllmchat bench serve``: the local API against llama.cpp's own server on clients that
take turns, in one run on the same model and threads.

- ``alternating_cached_fraction``: traffic A (an agent, a chat, a document; 6 rounds):
  prompt tokens read from a cache ÷ prompt tokens, rounds 2-6; llama-server's beside it
  (default flags: four slots and an 8 GiB host-RAM prompt cache).
- ``ttft_vs_llama_server_ratio``: time to the first token of returning turns, ours ÷ theirs.
- ``many_clients_cached_fraction``: traffic B (six clients), both given the same RAM
  budget for cached states (``--cache-ram``); ours spills to disk.
- ``restart_cached_fraction``: one more round after the app restarts.
- ``stream_decode_ratio``: decode tok/s streamed through the API ÷ in the app.
- ``disconnect_free_ms``: a client leaves mid-stream until the engine is free.
- ``concurrent_100``: 100 requests at once: served, refused with 429, other.
- ``window_lag_ms``: the longest stall of a loop ticking every 10 ms on the server
  process's main thread (where the window's event loop runs) while it serves traffic A.
- ``cache_ram_max_mib``: the most RAM the clients' states held, against the budget.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from vllmchat.bench.engine.llama_server import LlamaServer
from vllmchat.bench.serving.traffic import (
    Turn,
    cached_fraction,
    clients_a,
    clients_b,
    take_turns,
)
from vllmchat.core.app.events import Loaded
from vllmchat.core.app.serving.service import ApiService
from vllmchat.core.app.start import Started, open_app
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.settings import SamplingSettings
from vllmchat.server.runner import ApiServer

T = TypeVar("T")
MIB = 1 << 20


@contextmanager
def ours(
    model: str, folder: Path, n_ctx: int, threads: int, **settings: Any
) -> Iterator[tuple[str, ApiService]]:
    flat = {
        "model_path": model,
        "n_ctx": n_ctx,
        "n_threads": threads,
        "n_threads_batch": threads,
        **settings,
    }
    started = open_app(
        AppSettings.of(**flat), file=folder / "c.sqlite3", kv_folder=folder / "states"
    )
    assert isinstance(started, Started), started
    loaded = [
        e for e in started.app.load(started.app.settings, remember=False) if isinstance(e, Loaded)
    ]
    if not loaded:
        raise RuntimeError(f"{model} did not load")
    service = ApiService(started.app)
    server = ApiServer(service, "127.0.0.1", 0)
    server.start()
    try:
        yield server.address.url, service
    finally:
        server.stop()
        service.close()
        started.close()


def with_ticking_loop(work: Callable[[], T]) -> tuple[T, float]:
    """Run ``work`` on a thread while this thread ticks every 10 ms, as a window's event
    loop does in the same process; returns its result and the longest stall of the
    ticks (ms beyond the tick): what serving costs the thread a GUI would run on."""
    import threading

    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", work()), daemon=True)
    gaps: list[float] = []
    thread.start()
    last = time.perf_counter()
    while thread.is_alive():
        time.sleep(0.010)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    thread.join()
    return result["value"], max(0.0, (max(gaps) - 0.010) * 1000) if gaps else 0.0


def _server_side(logged: list[Any], skip: int) -> dict[str, float]:
    """Where a returning turn's time went inside the server (means, ms)."""
    later = logged[skip:]
    if not later:
        return {}
    return {
        "place_ms": round(statistics.mean(r.place_ms for r in later), 1),
        "engine_first_token_ms": round(statistics.mean(r.first_token_ms for r in later), 1),
    }


def _ttft_returning(turns: list[Turn]) -> float:
    return statistics.mean(t.ttft_s for t in turns if t.round_no >= 2)


def _decode_ratio(url: str, service: ApiService) -> dict[str, float]:
    ask = [{"role": "user", "content": "Write a long story about a lighthouse keeper and the sea."}]
    sampling = SamplingSettings(temperature=0.0, max_tokens=128, ignore_eos=True)
    in_app = []
    api = []
    for _ in range(3):
        for event in service.app.engine.chat(ask, sampling):
            if isinstance(event, DoneEvent):
                in_app.append(event.stats.decode_tok_s)
        from vllmchat.bench.serving.traffic import Client

        client = Client("story", "chat", 99, 1)
        client.messages = list(ask)
        api.append(take_turns(url, [client], 1, 128)[0].decode_tok_s)
    return {
        "stream_decode_ratio": round(statistics.median(api) / statistics.median(in_app), 3),
        "api_decode_tok_s": round(statistics.median(api), 1),
        "in_app_decode_tok_s": round(statistics.median(in_app), 1),
    }


def _disconnect_free_ms(url: str, service: ApiService) -> float:
    parsed = urlparse(url)
    body = json.dumps(
        {
            "model": "",
            "max_tokens": 500,
            "stream": True,
            "temperature": 0.0,
            "messages": [{"role": "user", "content": "Count from one to a thousand."}],
        }
    )
    conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    for _ in range(3):
        response.fp.readline()
    t0 = time.perf_counter()
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    queue = service.queue
    while queue.snapshot().running is not None and time.perf_counter() - t0 < 10:
        time.sleep(0.001)
    return round((time.perf_counter() - t0) * 1000, 1)


def _concurrent(url: str, n: int = 100) -> dict[str, int]:
    import urllib.error
    import urllib.request

    def one(k: int) -> int:
        data = json.dumps(
            {"model": "", "max_tokens": 2, "messages": [{"role": "user", "content": f"Say {k}"}]}
        )
        request = urllib.request.Request(
            url + "/v1/chat/completions",
            data=data.encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as r:
                json.loads(r.read())
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return -1

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        statuses = list(pool.map(one, range(n)))
    return {
        "served": statuses.count(200),
        "refused_429": statuses.count(429),
        "other": len(statuses) - statuses.count(200) - statuses.count(429),
    }


def run(
    *,
    model: str | None = None,
    quick: bool = False,
    n_ctx: int = 8192,
    threads: int = 2,
    ram_budget_mib: int = 256,
    n_gpu_layers: int = 0,
    flash_attn: bool = False,
    alternating_only: bool = False,
) -> dict[str, Any]:
    """Everything above; ``alternating_only``: traffic A alone (ours and llama-server's)."""
    path = model or str(demo_model_path())
    llama_server_args: tuple[str, ...] = (
        "-ngl",
        str(n_gpu_layers),
        "-fa",
        "on" if flash_attn else "off",
    )
    if alternating_only:
        return _alternating_only(
            path, quick, n_ctx, threads, n_gpu_layers, flash_attn, llama_server_args
        )
    rounds_a, rounds_b, max_tokens = (3, 3, 8) if quick else (6, 4, 16)
    scale = 0.5 if quick else 1.0
    out: dict[str, Any] = {"model": Path(path).name, "rounds_a": rounds_a, "rounds_b": rounds_b}
    folder = Path(tempfile.mkdtemp(prefix="vllmchat-serve-bench-"))
    # Traffic A on ours, a 10 ms loop ticking on this thread; then a restart, speed, leaving, load.
    clients = clients_a(scale)
    placed: dict[str, Any] = {"n_gpu_layers": n_gpu_layers, "flash_attn": flash_attn}
    logged: list[Any] = []
    with ours(path, folder / "a", n_ctx, threads, **placed) as (url, service):
        service.log.subscribe(logged.append)
        turns_a, lag = with_ticking_loop(lambda: take_turns(url, clients, rounds_a, max_tokens))
        out["returning_turn_inside"] = _server_side(logged, len(clients))
        out.update(_decode_ratio(url, service))
        out["disconnect_free_ms"] = _disconnect_free_ms(url, service)
        out["concurrent_100"] = _concurrent(url)
    out["window_lag_ms"] = round(lag, 1)
    out["alternating_cached_fraction"] = round(cached_fraction(turns_a), 4)
    out["prompt_tokens_a_round1"] = {t.client: t.prompt_tokens for t in turns_a if t.round_no == 1}
    with ours(path, folder / "a", n_ctx, threads) as (url, service):
        after = take_turns(url, clients, 1, max_tokens, first_round=rounds_a + 1)
    out["restart_cached_fraction"] = round(cached_fraction(after, 1), 4)
    # Traffic B: six clients, a small RAM budget for their states.
    seen: list[int] = []
    with ours(path, folder / "b", n_ctx, threads, api_cache_ram_mib=ram_budget_mib) as (
        url,
        service,
    ):
        service.states_changed.subscribe(lambda s: seen.append(s.ram_bytes))
        turns_b = take_turns(url, clients_b(scale), rounds_b, max_tokens)
        states = service.states()
    out["many_clients_cached_fraction"] = round(cached_fraction(turns_b), 4)
    out["cache_ram_max_mib"] = round(max(seen, default=0) / MIB, 1)
    out["cache_ram_budget_mib"] = ram_budget_mib
    out["cache_disk_mib"] = round((states.disk_bytes if states else 0) / MIB, 1)
    # llama.cpp's own server, default flags, the same traffic.
    with LlamaServer(path, n_ctx=n_ctx, threads=threads, extra=llama_server_args) as server:
        theirs_a = take_turns(server.url, clients_a(scale), rounds_a, max_tokens)
    with LlamaServer(
        path,
        n_ctx=n_ctx,
        threads=threads,
        extra=(*llama_server_args, "--cache-ram", str(ram_budget_mib)),
    ) as server:
        theirs_b = take_turns(server.url, clients_b(scale), rounds_b, max_tokens)
    out["llama_server_alternating_cached_fraction"] = round(cached_fraction(theirs_a), 4)
    out["llama_server_many_clients_cached_fraction"] = round(cached_fraction(theirs_b), 4)
    ours_ttft, theirs_ttft = _ttft_returning(turns_a), _ttft_returning(theirs_a)
    out["ttft_returning_ms"] = round(ours_ttft * 1000, 1)
    out["llama_server_ttft_returning_ms"] = round(theirs_ttft * 1000, 1)
    out["ttft_vs_llama_server_ratio"] = round(ours_ttft / theirs_ttft, 3)
    return out


def _alternating_only(
    path: str,
    quick: bool,
    n_ctx: int,
    threads: int,
    n_gpu_layers: int,
    flash_attn: bool,
    llama_server_args: tuple[str, ...],
) -> dict[str, Any]:
    rounds, max_tokens = (3, 8) if quick else (6, 16)
    out: dict[str, Any] = {
        "model": Path(path).name,
        "rounds_a": rounds,
        "n_gpu_layers": n_gpu_layers,
        "flash_attn": flash_attn,
    }
    folder = Path(tempfile.mkdtemp(prefix="vllmchat-serve-bench-"))
    placed: dict[str, Any] = {"n_gpu_layers": n_gpu_layers, "flash_attn": flash_attn}
    logged: list[Any] = []
    with ours(path, folder, n_ctx, threads, **placed) as (url, service):
        service.log.subscribe(logged.append)
        turns = take_turns(url, clients_a(), rounds, max_tokens)
    out["returning_turn_inside"] = _server_side(logged, 3)
    out["alternating_cached_fraction"] = round(cached_fraction(turns), 4)
    out["ttft_returning_ms"] = round(_ttft_returning(turns) * 1000, 1)
    try:
        with LlamaServer(path, n_ctx=n_ctx, threads=threads, extra=llama_server_args) as server:
            theirs = take_turns(server.url, clients_a(), rounds, max_tokens)
    except (FileNotFoundError, RuntimeError, TimeoutError) as exc:
        out["llama_server"] = f"not run: {exc}"
        return out
    out["llama_server_alternating_cached_fraction"] = round(cached_fraction(theirs), 4)
    out["llama_server_ttft_returning_ms"] = round(_ttft_returning(theirs) * 1000, 1)
    out["ttft_vs_llama_server_ratio"] = round(_ttft_returning(turns) / _ttft_returning(theirs), 3)
    return out
