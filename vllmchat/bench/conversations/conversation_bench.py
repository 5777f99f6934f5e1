"""``vllmchat bench conversation``: a 200-turn soak, and reopening with a saved KV state."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from vllmchat.core.app.engines import open_local
from vllmchat.core.conversations.events import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.conversations.turns.session import ChatSession, SessionConfig
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, TokenEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings

TOPICS = ["rivers", "bread", "stars", "cats", "trains", "music", "rain", "chess", "bees", "maps"]


def _soak(model: str, folder: Path, turns: int) -> dict[str, Any]:
    client = open_local()
    store = ConversationStore(folder / "soak.sqlite3")
    try:
        client.load(LoadSettings(model_path=model, n_ctx=2048, n_threads=2))
        conv = store.create(system_prompt="You are a friendly, concise assistant.")
        session = ChatSession(
            store,
            client,
            conv.id,
            SessionConfig(
                policy=ContextPolicy(),
                sampling=SamplingSettings(temperature=0.7, max_tokens=48, seed=11),
            ),
        )
        errors, over, summaries, fallbacks, sent = 0, 0, 0, 0, 0
        t0 = time.perf_counter()
        for i in range(turns):
            sent += 1
            events = list(
                session.send(f"Turn {i}: tell me something about {TOPICS[i % len(TOPICS)]}.")
            )
            if not isinstance(events[-1], DoneEvent):
                errors += 1
            for e in events:
                if isinstance(e, PromptPlanEvent):
                    over += max(0, e.prompt_tokens + 48 - e.n_ctx) > 0
                elif isinstance(e, SummaryEvent):
                    summaries += e.status == "done"
                    fallbacks += e.status == "fallback"
        stored = store.path(conv.id)
        lost = (
            sent
            - sum(m.role == "user" for m in stored)
            + sum(1 for m in stored if m.role == "assistant" and not m.content)
        )
        return {
            "soak_turns": sent - errors,
            "soak_errors": errors,
            "max_prompt_over_ctx": over,
            "summaries": summaries,
            "summary_fallbacks": fallbacks,
            "messages_lost": lost,
            "soak_s": round(time.perf_counter() - t0, 1),
            "store_integrity": store.integrity_check(),
        }
    finally:
        client.close()
        store.close()


def _first_token_s(session: ChatSession, text: str, t0: float) -> float:
    for event in session.send(text):
        if isinstance(event, TokenEvent):
            first = time.perf_counter() - t0
            session.stop()
            return first
        if isinstance(event, ErrorEvent):
            raise RuntimeError(event.message)
    raise RuntimeError("no token")


def _reopen(model: str, folder: Path) -> dict[str, Any]:
    settings = LoadSettings(model_path=model, n_ctx=4096, n_threads=2)
    store = ConversationStore(folder / "reopen.sqlite3")
    kv = KVStateCache(folder / "kv")
    sampling = SamplingSettings(temperature=0.0, max_tokens=64, ignore_eos=True)
    client = open_local()
    try:
        client.load(settings)
        conv = store.create(system_prompt="You are a storyteller.")
        session = ChatSession(
            store,
            client,
            conv.id,
            SessionConfig(sampling=sampling, policy=ContextPolicy(threshold=0.95)),
        )
        i = 0
        while client.kv().kv_tokens < 2000:
            list(session.send(f"Continue the story, chapter {i}. " + "Add details. " * 10))
            i += 1
        tokens = kv.save(client, conv.id)
        client.close()
        timings = {}
        for mode in ("restored", "cold"):
            client = open_local()
            client.load(settings)
            reopened = ChatSession(store, client, conv.id, SessionConfig(sampling=sampling))
            t0 = time.perf_counter()
            reopened.prime()
            if mode == "restored":
                kv.restore(client, conv.id)
            timings[mode] = _first_token_s(reopened, "What happens next?", t0)
            client.close()
        return {
            "reopen_tokens": tokens,
            "reopen_ttft_s": round(timings["restored"], 4),
            "cold_ttft_s": round(timings["cold"], 4),
            "reopen_ttft_ratio": round(timings["restored"] / timings["cold"], 4),
        }
    finally:
        client.close()
        store.close()


def run(*, model: str | None = None, quick: bool = False) -> dict[str, Any]:
    from vllmchat.core.demo_model import gemma_model_path

    path = model or str(gemma_model_path())
    with tempfile.TemporaryDirectory() as tmp:
        result = {"model": Path(path).name}
        result.update(_soak(path, Path(tmp), 40 if quick else 200))
        result.update(_reopen(path, Path(tmp)))
    return result
