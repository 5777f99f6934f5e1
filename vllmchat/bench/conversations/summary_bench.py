"""``vllmchat bench summary``: do planted facts survive summaries, and does the turn
that summarizes wait?

A conversation at n_ctx 2048 plants facts (names, numbers, a diet, a date), phrased
as people write them and not as the stated-facts rule expects, among requests that
name places and numbers, long enough for at least three summaries. Figures:

- ``facts_in_prompt``: the share of planted values in the final prompt's system block
  (pins, fact list, summary: what carries them past the summaries);
- ``pinned_in_prompt``: the same with the fact messages pinned;
- ``facts_listed`` and ``non_facts_listed``: planted facts the stated-facts rule put
  in the conversation's fact list, and entries there that no planted fact holds;
- ``fact_recall`` and ``fact_recall_control``: questions about the facts answered
  right after the summaries, and with the same messages at a context that needs
  no summary;
- ``summary_turn_ttft_ratio``: first-token time of the turns that summarize ÷ the
  median of the others, when the reader pauses (the summary is made meanwhile),
  and ``..._no_pause`` (made inside the turn);
- ``messages_lost`` and ``max_prompt_over_ctx``.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, TokenEvent

# (the message that plants it, the value to find, the question that asks for it). The
# sentences are the held-out ones the stated-facts rule is tested on (tests/
# held_out_facts.py), not written in its shapes: the first eight were written before
# the rule, the last four to probe it, and it misses those four.
FACTS = [
    ("My wife's name is Sunita and she teaches chemistry.", "Sunita", "What is my wife's name?"),
    ("I work night shifts at the hospital.", "hospital", "Where do I work?"),
    ("Our office moved to Rotterdam last year.", "Rotterdam", "In which city is our office?"),
    ("My laptop runs Ubuntu 22.04.", "22.04", "Which Ubuntu version does my laptop run?"),
    ("I'm vegetarian.", "vegetarian", "What is my diet?"),
    ("We have two kids.", "two", "How many kids do we have?"),
    ("The deadline for the grant is 30 September.", "30 September", "When is the grant due?"),
    ("My cousin Tomás is visiting next week.", "Tomás", "Which cousin is visiting?"),
    ("Anna lives in Oslo.", "Oslo", "Where does Anna live?"),
    ("Tengo 34 años.", "34", "How old am I?"),
    ("Allergic to shellfish, just so you know.", "shellfish", "What am I allergic to?"),
    ("Call me Sam.", "Sam", "What should you call me?"),
]
# Requests, some naming places and numbers: none of them is a fact to keep.
REQUESTS = [
    "Convert 5 miles to kilometers.",
    "Use React for the frontend of a small to-do app and sketch its parts.",
    "Give me three names for a bakery.",
    'Translate "good morning" into Japanese.',
    "Tell me a joke about penguins.",
    "Write a haiku about Kyoto in autumn.",
    "List the planets in order.",
    "Compare Python and Go for web servers.",
    "Show me an example with 2 threads.",
    "Write a short paragraph about rivers.",
    "Explain how bread rises.",
    "Describe the rings of Saturn in 3 sentences.",
    "Summarize the history of chess briefly.",
    "Now write about Lisbon.",
]
N_CTX, CONTROL_N_CTX, REPLY_TOKENS, PAUSE_S = 2048, 8192, 96, 5.0
SYSTEM = "You are a helpful assistant."


def script(turns: int) -> list[str]:
    """The user's messages: a fact every few turns among requests."""
    messages, facts = [], iter(FACTS)
    for i in range(turns):
        fact = next(facts, None) if i % 2 == 0 else None
        request = REQUESTS[i % len(REQUESTS)]
        messages.append(f"{fact[0]} {request}" if fact else request)
    return messages


@dataclass
class Run:
    """What one pass over the script measured."""

    ttft: list[float] = field(default_factory=list)
    summarized: list[bool] = field(default_factory=list)  # this turn's prompt is fresh from one
    summaries: int = 0
    ahead: int = 0
    over_ctx: int = 0
    errors: list[str] = field(default_factory=list)


def _app(folder: Path, model: str, n_ctx: int, server: str | None, name: str) -> ChatApp:
    store = ConversationStore(folder / f"{name}.sqlite3")
    app = ChatApp(store, KVStateCache(folder / f"kv-{name}"))
    flat: dict[str, Any] = {
        "model_path": model,
        "n_ctx": n_ctx,
        "n_threads": 2,
        "temperature": 0.0,
        "max_tokens": REPLY_TOKENS,
        "keep_last_turns": 2,
        "summary_server": server or "",
    }
    app.open_conversation(store.create(system_prompt=SYSTEM).id)
    for event in app.load(AppSettings.of(**flat)):
        if hasattr(event, "fix"):
            raise RuntimeError(f"load failed: {event}")
    return app


def _turn(app: ChatApp, text: str, run: Run) -> None:
    t0, first = time.perf_counter(), None
    made = False
    for event in app.send(text):
        if isinstance(event, TokenEvent) and first is None:
            first = time.perf_counter() - t0
        elif isinstance(event, SummaryEvent) and event.status == "done":
            made, run.summaries = True, run.summaries + 1
        elif isinstance(event, PromptPlanEvent):
            run.over_ctx = max(run.over_ctx, event.prompt_tokens - event.n_ctx)
        elif isinstance(event, ErrorEvent):
            run.errors.append(event.message)
    run.ttft.append(first if first is not None else time.perf_counter() - t0)
    run.summarized.append(made)


def _read_pause(app: ChatApp, run: Run) -> bool:
    """The reader's pause: the summary ahead is made while it lasts (cut short when done)."""
    typed, events = threading.Event(), list[object]()
    worker = threading.Thread(
        target=lambda: events.extend(app.reading.prepare_next(busy=typed.is_set))
    )
    worker.start()
    worker.join(PAUSE_S)
    typed.set()
    worker.join()
    made = any(isinstance(e, SummaryEvent) and e.status == "done" for e in events)
    run.summaries += made
    run.ahead += made
    return made


def _converse(app: ChatApp, messages: list[str], *, pause: bool, pins: bool = False) -> Run:
    run, fresh = Run(), False
    values = [f[1] for f in FACTS]
    for text in messages:
        _turn(app, text, run)
        run.summarized[-1] = run.summarized[-1] or fresh
        if pins and any(v in text for v in values) and app.session is not None:
            path = app.store.path(app.session.conversation_id)
            user = [m for m in path if m.role == "user"][-1]
            app.store.set_pinned(user.id, True)
        fresh = _read_pause(app, run) if pause else False
    return run


def _prompt_text(app: ChatApp) -> str:
    """The final prompt's system block: what carries facts past the summaries (pins,
    the fact list, the summary); a reply in the recent turns that echoes a value
    does not count."""
    session = app.session
    assert session is not None
    prompt, _ = session.plan(app.store.path(session.conversation_id))
    return prompt[0]["content"] if prompt and prompt[0]["role"] == "system" else ""


def _share_in(text: str) -> float:
    return round(sum(f[1].lower() in text.lower() for f in FACTS) / len(FACTS), 3)


def _fact_list(app: ChatApp) -> dict[str, float | int]:
    """How the stated-facts rule did on the script: the share of planted facts in the
    conversation's fact list, and the entries that are no planted fact (requests)."""
    assert app.conversation_id is not None
    listed = [f.text for f in app.facts.facts(app.conversation_id)]
    planted = [f[0] for f in FACTS]
    found = sum(any(t in p for t in listed) for p in planted)
    false = sum(not any(t in p for p in planted) for t in listed)
    return {"facts_listed": round(found / len(FACTS), 3), "non_facts_listed": false}


def _recall(app: ChatApp) -> float:
    """Each question asked on its own branch from the conversation's tip."""
    store, conv = app.store, app.conversation_id
    assert conv is not None
    tip = store.conversation(conv).leaf_id
    right = 0
    for _, value, question in FACTS:
        answer = next((e.text for e in app.send(question) if isinstance(e, DoneEvent)), "")
        right += value.lower() in answer.lower()
        if tip is not None:
            store.set_leaf(conv, tip)
    return round(right / len(FACTS), 3)


def _ratio(run: Run) -> float | None:
    crossing = [t for t, s in zip(run.ttft, run.summarized, strict=True) if s]
    normal = [t for t, s in zip(run.ttft, run.summarized, strict=True) if not s]
    if not crossing or not normal:
        return None
    return round(statistics.median(crossing) / statistics.median(normal), 2)


def _lost(app: ChatApp, sent: int) -> int:
    path = app.store.path(app.conversation_id) if app.conversation_id else []
    users = sum(m.role == "user" for m in path)
    empty = sum(m.role == "assistant" and not m.content for m in path)
    return sent - users + empty


def _copy_into(control: ChatApp, source: ChatApp) -> None:
    """The same messages (the summarized run's replies included), no summary needed."""
    assert source.conversation_id is not None and control.conversation_id is not None
    for m in source.store.path(source.conversation_id):
        control.store.add_message(control.conversation_id, m.role, m.content)


def _one(model: str, server: str | None, turns: int, folder: Path) -> dict[str, Any]:
    messages = script(turns)
    apps: list[ChatApp] = []
    try:
        paused = _app(folder, model, N_CTX, server, "paused")
        apps.append(paused)
        run = _converse(paused, messages, pause=True)
        prompt = _prompt_text(paused)
        result: dict[str, Any] = {
            "turns": turns,
            "facts_planted": len(FACTS),
            "summaries": run.summaries,
            "summaries_ahead": run.ahead,
            "facts_in_prompt": _share_in(prompt),
            **_fact_list(paused),
            "summary_turn_ttft_ratio": _ratio(run),
            "normal_ttft_s": round(statistics.median(run.ttft), 3),
            "messages_lost": _lost(paused, len(messages)),
            "max_prompt_over_ctx": max(0, run.over_ctx),
            "errors": run.errors[:3],
        }
        result["fact_recall"] = _recall(paused)
        control = _app(folder, model, CONTROL_N_CTX, server, "control")
        apps.append(control)
        _copy_into(control, paused)
        result["fact_recall_control"] = _recall(control)
        rushed = _app(folder, model, N_CTX, server, "rushed")
        apps.append(rushed)
        fallback = _converse(rushed, messages, pause=False)
        result["summary_turn_ttft_ratio_no_pause"] = _ratio(fallback)
        result["summaries_no_pause"] = fallback.summaries
        pinned = _app(folder, model, N_CTX, server, "pinned")
        apps.append(pinned)
        pin_run = _converse(pinned, messages, pause=True, pins=True)
        result["pinned_in_prompt"] = _share_in(_prompt_text(pinned))
        result["summaries_pinned"] = pin_run.summaries
        result["messages_lost"] += _lost(rushed, len(messages)) + _lost(pinned, len(messages))
        return result
    finally:
        for app in apps:
            app.shutdown()
            app.store.close()


def run(
    *, model: str | None = None, server: str | None = None, quick: bool = False
) -> dict[str, Any]:
    """The figures for ``model`` (default: the demo model), its summaries written by
    itself or by ``server``."""
    turns = 48 if quick else 62
    with tempfile.TemporaryDirectory(prefix="vllmchat-summary-") as tmp:
        path = model or str(demo_model_path())
        result = {"model": Path(path).name, "server": server or "", "n_ctx": N_CTX}
        result.update(_one(path, server, turns, Path(tmp)))
        return result
