"""``vllmchat bench serve --parallel``: several clients at once, ours (API slots, one
batched decode per step) against llama-server with ``-np N`` (a slot per client, the
same context per slot, threads, GPU layers and flash attention), in one run.

- ``tok_s``: aggregate completion tokens per second with 1, 4 and 8 clients streaming
  greedy replies of ``max_tokens`` (``ignore_eos``, no repeat penalty on either side),
  and llama-server's beside it;
  ``ratio_4_over_1`` for both, and ours ÷ theirs at 4 and 8 clients.
- ``ttft_returning_8_ms``: a returning client's time to the first token while the
  other seven return too, ours and theirs, and the ratio.
- ``greedy_identical_alone_vs_8``: client 0's reply alone and beside 7 others, both from
  its kept state; ``greedy_identical_fresh_vs_returning``: its first reply (the prompt
  prefilled in one chunk) against the returning one (only the last prompt token evaluated
  again, alone), which llama.cpp's kernels need not make identical.
- ``ttft_returning_after_restart_8_ms``: the eight come back, each to a conversation of
  about 1,000 tokens, after the server was stopped and started again: ours read their
  states from disk, llama-server (whose prompt cache lives in RAM) reads the prompts
  again; and the ratio.
- ``window_ttft_ratio``: the window's turn's time to the first token with 4 clients
  streaming ÷ alone (the window's turn steps between theirs).
- ``single_client_decode_vs_window_path``: one API client's decode tok/s in its slot
  ÷ the window's turn's (the path every API turn took before the slots), both as the
  engine measured them; ``single_client_decode_client_tok_s``: as the client read it
  (its HTTP stream shares the CPU).
- ``concurrent_100``: 100 requests at once: served, refused with 429 (Retry-After),
  other (none should be).
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from vllmchat.bench.engine.llama_server import LlamaServer
from vllmchat.bench.serving.serve_bench import _concurrent, ours
from vllmchat.core.app.serving.service import ApiService
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import DoneEvent

LEVELS = (1, 4, 8)
TOPICS = ["rivers", "lighthouses", "bread", "glaciers", "owls", "trains", "copper", "tides"]


def _document(k: int) -> str:
    """A long system prompt (about 1,000 tokens): an agent's notes or a pasted file."""
    items = (
        f"Item {i}: the {TOPICS[(k + i) % 8]} ledger holds {i * 7 + k} entries." for i in range(60)
    )
    return f"You keep the notes of client {k}. " + " ".join(items)


def _messages(k: int, follow_up: str = "", long: bool = False) -> list[dict[str, str]]:
    system = (
        _document(k) if long else "You are a careful assistant who writes long, plain answers. " * 6
    )
    out = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Client {k}: write a long story about {TOPICS[k % 8]}."},
    ]
    if follow_up:
        out += [{"role": "assistant", "content": follow_up}, {"role": "user", "content": "Go on."}]
    return out


def _stream(
    url: str, k: int, max_tokens: int, follow_up: str, long: bool = False
) -> dict[str, Any]:
    body = {
        "model": "",
        "messages": _messages(k, follow_up, long),
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "repeat_penalty": 1.0,  # llama-server's default; the app's own is 1.1
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": f"client-{k}",
        "prompt_cache_key": f"client-{k}",
    }
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    t0 = time.perf_counter()
    first = 0.0
    pieces: list[str] = []
    usage: dict[str, Any] = {}
    with urllib.request.urlopen(request, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    first = first or time.perf_counter()
                    pieces.append(piece)
    end = time.perf_counter()
    tokens = int(usage.get("completion_tokens") or len(pieces))
    rate = (tokens - 1) / (end - first) if tokens > 1 and end > first else 0.0
    return {
        "t0": t0,
        "ttft": (first or end) - t0,
        "end": end,
        "tokens": tokens,
        "decode_tok_s": rate,
        "text": "".join(pieces),
    }


def _round(
    url: str, n: int, max_tokens: int, follow: list[str] | None = None, long: bool = False
) -> list[dict[str, Any]]:
    """``n`` clients at once, from this process's threads."""
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        jobs = [
            pool.submit(_stream, url, k, max_tokens, follow[k] if follow else "", long)
            for k in range(n)
        ]
        return [j.result() for j in jobs]


def _levels(url: str, max_tokens: int) -> dict[str, Any]:
    """Each level's aggregate tok/s; then the eight return at once (their TTFT)."""
    out: dict[str, Any] = {"tok_s": {}}
    texts: dict[int, list[str]] = {}
    for n in LEVELS:
        done = _round(url, n, max_tokens)
        wall = max(d["end"] for d in done) - min(d["t0"] for d in done)
        out["tok_s"][str(n)] = round(sum(d["tokens"] for d in done) / wall, 2)
        texts[n] = [d["text"] for d in done]
        if n == 1:
            out["single_decode_tok_s"] = round(done[0]["decode_tok_s"], 2)
    # Client 0 returns alone with the same messages: its state is reused as it was at 4
    # and 8 clients, so alone and beside 7 start from the same state.
    alone = _stream(url, 0, max_tokens, "")["text"]
    out["identical"] = alone == texts[8][0]
    out["identical_fresh_vs_returning"] = texts[1][0] == alone
    back = _round(url, 8, 8, [t[:200] for t in texts[8]])
    out["ttft_returning_8_ms"] = _mean_ttft_ms(back)
    return out


def _in_own_process(url: str, max_tokens: int, work: Callable[..., Any] = _levels) -> Any:
    """The clients' side runs in a process of its own (its reading shares no interpreter
    with the server)."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(work, url, max_tokens).result()


def _long_first(url: str, max_tokens: int) -> list[str]:
    """The eight open their long conversations; their replies."""
    return [d["text"] for d in _round(url, 8, max_tokens, long=True)]


def _returning_ttft(restart: Callable[[], AbstractContextManager[str]], max_tokens: int) -> float:
    """The eight's mean TTFT (ms) coming back to their long conversations after
    ``restart``'s server was stopped and started again."""
    with restart() as url:
        replies = _in_own_process(url, max_tokens, _long_first)
    with restart() as url:
        back: float = _in_own_process(url, max_tokens, partial(_long_back, replies))
    return back


def _long_back(replies: list[str], url: str, max_tokens: int) -> float:
    return _mean_ttft_ms(_round(url, 8, max_tokens, [r[:200] for r in replies], long=True))


def _mean_ttft_ms(done: list[dict[str, Any]]) -> float:
    return round(statistics.mean(float(d["ttft"]) for d in done) * 1000, 1)


def _window_ttft(url: str, service: ApiService, max_tokens: int) -> dict[str, float]:
    """The window's turn alone, then with 4 clients streaming."""
    app = service.app

    def turn(text: str) -> DoneEvent:
        app.new_chat()  # each turn a new conversation: the same prefill alone and beside
        events = list(app.send(text))
        done = [e for e in events if isinstance(e, DoneEvent)]
        if not done:
            raise RuntimeError(f"the window's turn did not finish: {events[-3:]!r}")
        return done[-1]

    def question(topic: str) -> str:
        # A new opening each run: no kept state (in RAM or on disk) holds this prompt.
        opening = f"Question {uuid.uuid4().hex[:8]} about {topic}. "
        return opening + f"Name three facts about {topic} in one short line each, please. " * 12

    turn(question("salt"))  # the window's first turn pays what a first turn pays, once
    alone = turn(question("maps"))
    streaming = threading.Thread(target=_round, args=(url, 4, max_tokens * 4), daemon=True)
    streaming.start()
    time.sleep(1.0)  # the four are decoding
    beside = turn(question("tea"))
    streaming.join()
    return {
        "window_ttft_alone_ms": round(alone.stats.ttft_s * 1000, 1),
        "window_ttft_4_streaming_ms": round(beside.stats.ttft_s * 1000, 1),
        "window_ttft_ratio": round(beside.stats.ttft_s / max(alone.stats.ttft_s, 1e-6), 3),
        "window_decode_tok_s": round(alone.stats.decode_tok_s, 2),
    }


def run(
    *,
    model: str | None = None,
    n_ctx: int = 2048,
    threads: int = 2,
    max_tokens: int = 64,
    n_gpu_layers: int = 0,
    flash_attn: bool = False,
) -> dict[str, Any]:
    """Everything above; ``n_ctx`` is each slot's context."""
    path = model or str(demo_model_path())
    slots = max(LEVELS)
    out: dict[str, Any] = {
        "model": Path(path).name,
        "slots": slots,
        "n_ctx_per_slot": n_ctx,
        "threads": threads,
        "n_gpu_layers": n_gpu_layers,
        "flash_attn": flash_attn,
        "max_tokens": max_tokens,
    }
    folder = Path(tempfile.mkdtemp(prefix="vllmchat-parallel-bench-"))
    placed: dict[str, Any] = {
        "n_gpu_layers": n_gpu_layers,
        "flash_attn": flash_attn,
        "api_parallel": slots,
        "api_slots": slots,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "speculation": "off",
    }
    logged: list[Any] = []
    with ours(path, folder, n_ctx, threads, **placed) as (url, service):
        unsubscribe = service.log.subscribe(logged.append)
        mine = _in_own_process(url, max_tokens)
        unsubscribe()
        out.update(_window_ttft(url, service, max_tokens))
        out["concurrent_100"] = _concurrent(url)
    extra = ("-np", str(slots), "-ngl", str(n_gpu_layers), "-fa", "on" if flash_attn else "off")
    with LlamaServer(path, n_ctx=n_ctx * slots, threads=threads, extra=extra) as server:
        theirs = _in_own_process(server.url, max_tokens)
    kept = Path(tempfile.mkdtemp(prefix="vllmchat-restart-bench-"))

    @contextmanager
    def ours_again() -> Iterator[str]:
        with ours(path, kept, n_ctx, threads, **placed) as (url, _service):
            yield url

    @contextmanager
    def theirs_again() -> Iterator[str]:
        with LlamaServer(path, n_ctx=n_ctx * slots, threads=threads, extra=extra) as server:
            yield server.url

    mine_back, their_back = _returning_ttft(ours_again, 8), _returning_ttft(theirs_again, 8)
    out["ttft_returning_after_restart_8_ms"] = mine_back
    out["llama_server_ttft_returning_after_restart_8_ms"] = their_back
    out["ttft_returning_after_restart_ratio"] = round(mine_back / max(their_back, 1e-3), 3)
    ours_tok, their_tok = mine["tok_s"], theirs["tok_s"]
    out["tok_s"] = ours_tok
    out["llama_server_tok_s"] = their_tok
    out["ratio_4_over_1"] = round(ours_tok["4"] / ours_tok["1"], 3)
    out["llama_server_ratio_4_over_1"] = round(their_tok["4"] / their_tok["1"], 3)
    for n in ("4", "8"):
        out[f"vs_llama_server_{n}"] = round(ours_tok[n] / their_tok[n], 3)
    out["ttft_returning_8_ms"] = mine["ttft_returning_8_ms"]
    out["llama_server_ttft_returning_8_ms"] = theirs["ttft_returning_8_ms"]
    out["ttft_returning_ratio"] = round(
        mine["ttft_returning_8_ms"] / max(theirs["ttft_returning_8_ms"], 1e-3), 3
    )
    out["greedy_identical_alone_vs_8"] = mine["identical"]
    out["llama_server_greedy_identical_alone_vs_8"] = theirs["identical"]
    out["greedy_identical_fresh_vs_returning"] = mine["identical_fresh_vs_returning"]
    out["llama_server_greedy_identical_fresh_vs_returning"] = theirs["identical_fresh_vs_returning"]
    # The first request was the one client's (the 1-client level): its engine-side
    # decode speed, measured as the window's turn's is; and as its client read it.
    chats = [r for r in logged if r.what.endswith("/chat/completions") and r.status == 200]
    single = chats[0].decode_tok_s if chats else 0.0
    out["single_client_decode_tok_s"] = round(single, 2)
    out["single_client_decode_client_tok_s"] = mine["single_decode_tok_s"]
    out["single_client_decode_vs_window_path"] = round(
        single / max(out["window_decode_tok_s"], 1e-6), 3
    )
    return out
