"""``vllmchat bench store``: opening a 200 MB conversation store costs what a 1 MB one does.

Both stores are built in a temp folder with the store's own schema and triggers
(full-text index included): conversations of 40 messages, user questions and
assistant replies with token ids and stats, as the app writes them. Each open is
``open_store`` (what ``vllmchat`` and ``vllmchat chat`` do at start) and a close,
timed alternately on both stores; the medians are compared.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from vllmchat.core.conversations.store.recovery import WHOLE_CHECK_BYTES, check, open_store
from vllmchat.core.conversations.store.store import ConversationStore

VOCABULARY = (
    "the a of and to in is that it for on with as was at by river bread star cat train "
    "music rain chess bee map model token layer memory context summary question answer "
    "because however which would could should about there their then than when where"
)
MESSAGES_PER_CONVERSATION = 40


def _text(rnd: random.Random, words: int) -> str:
    vocabulary = VOCABULARY.split()
    return " ".join(rnd.choice(vocabulary) for _ in range(words)).capitalize() + "."


def build_store(path: Path, size_bytes: int, *, seed: int = 1) -> dict[str, int]:
    """A store of about ``size_bytes`` with real-looking conversations; returns counts."""
    ConversationStore(path).close()  # the schema, migrated as the app does
    store = ConversationStore(path)
    db, rnd = store.db, random.Random(seed)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    conversations = messages = 0
    while db.execute("PRAGMA page_count").fetchone()[0] * page < size_bytes:
        conversations += 1
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO conversations(id, title, created, updated) VALUES (?,?,?,?)",
            (conversations, _text(rnd, 5), time.time(), time.time()),
        )
        parent = None
        for m in range(MESSAGES_PER_CONVERSATION):
            user = m % 2 == 0
            ids = [] if user else [rnd.randrange(32000) for _ in range(rnd.randint(100, 400))]
            stats = {} if user else {"decode_tok_s": 20.0, "ttft_s": 0.2, "tokens": len(ids)}
            cur = db.execute(
                "INSERT INTO messages(conversation_id, parent_id, role, content, created,"
                " tokens, token_ids, model, stats) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    conversations,
                    parent,
                    "user" if user else "assistant",
                    _text(rnd, rnd.randint(10, 60) if user else rnd.randint(80, 300)),
                    time.time(),
                    len(ids),
                    json.dumps(ids) if ids else None,
                    "" if user else "gemma-3-270m-it-Q4_K_M.gguf",
                    json.dumps(stats),
                ),
            )
            parent = cur.lastrowid
            messages += 1
        db.execute("UPDATE conversations SET leaf_id=? WHERE id=?", (parent, conversations))
        db.execute("COMMIT")
    store.close()  # the last close checkpoints the WAL into the file
    return {"conversations": conversations, "messages": messages}


def _open_s(path: Path) -> float:
    t0 = time.perf_counter()
    store, recovery = open_store(path)
    elapsed = time.perf_counter() - t0
    store.close()
    if recovery is not None:
        raise RuntimeError(recovery.message())
    return elapsed


def _whole_check_s(path: Path) -> float:
    store = ConversationStore(path)
    t0 = time.perf_counter()
    problems = check(store.db)
    elapsed = time.perf_counter() - t0
    store.close()
    if problems:
        raise RuntimeError(problems)
    return elapsed


def run(*, quick: bool = False) -> dict[str, Any]:
    repeats = 7 if quick else 21
    sizes = {"256kb": 256 * 1024, "1mb": 2**20, "200mb": 200 * 2**20}
    with tempfile.TemporaryDirectory(prefix="vllmchat-bench-store-") as tmp:
        paths = {name: Path(tmp) / f"{name}.sqlite3" for name in sizes}
        t0 = time.perf_counter()
        counts = {name: build_store(paths[name], size) for name, size in sizes.items()}
        built_s = time.perf_counter() - t0
        for path in paths.values():
            _open_s(path)  # warm the page cache, as any start after the first finds it
        times: dict[str, list[float]] = {name: [] for name in sizes}
        for _ in range(repeats):  # in turn, so a busy moment of the machine hits all
            for name, path in paths.items():
                times[name].append(_open_s(path))
        ms = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
        return {
            "open_ratio_200mb_vs_1mb": round(ms["200mb"] / ms["1mb"], 3),
            "open_1mb_ms": round(ms["1mb"], 2),
            "open_200mb_ms": round(ms["200mb"], 2),
            # a store this small is checked whole at each start
            "open_256kb_ms": round(ms["256kb"], 2),
            "whole_check_up_to_bytes": WHOLE_CHECK_BYTES,
            **{f"size_{name}_bytes": path.stat().st_size for name, path in paths.items()},
            **{f"messages_{name}": counts[name]["messages"] for name in sizes},
            "opens_each": repeats,
            # what every start paid before (besides copying the file and its WAL)
            "whole_check_1mb_ms": round(_whole_check_s(paths["1mb"]) * 1000, 1),
            "whole_check_200mb_ms": round(_whole_check_s(paths["200mb"]) * 1000, 1),
            "build_s": round(built_s, 1),
        }
