"""Clients that take turns on an OpenAI-compatible server: an agent with a long system
prompt and tools, a chat with a long history, a question about a long document. Each
round every client sends its whole conversation again with one new message, as real
clients do; what the server read from its cache is what it reports."""

from __future__ import annotations

import json
import random
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the project",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "query": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read_file", "search_code", "list_folder", "run_tests")
]

WORDS = [
    "the",
    "model",
    "server",
    "client",
    "cache",
    "token",
    "prompt",
    "reply",
    "memory",
    "layer",
    "engine",
    "queue",
    "state",
    "file",
    "disk",
    "budget",
    "window",
    "thread",
    "stream",
    "request",
    "answer",
    "question",
    "document",
    "library",
    "river",
    "mountain",
    "garden",
    "kitchen",
    "letter",
    "market",
    "station",
    "harbor",
    "forest",
    "village",
    "winter",
]


def text_of(n_words: int, seed: int) -> str:
    """Deterministic prose of about ``n_words`` words."""
    rng = random.Random(seed)
    sentences: list[str] = []
    while sum(len(s.split()) for s in sentences) < n_words:
        length = rng.randint(8, 16)
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(length)).capitalize() + ".")
    return " ".join(sentences)


@dataclass
class Client:
    """One client's conversation; ``words`` sizes its opening (about 1.3 tokens a word)."""

    name: str
    kind: str  # "agent", "chat" or "document"
    seed: int
    words: int
    messages: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        body = text_of(self.words, self.seed)
        if self.kind == "agent":
            self.messages = [
                {"role": "system", "content": "You are a coding agent. Project notes: " + body},
                {"role": "user", "content": "Which file holds the queue?"},
            ]
        elif self.kind == "chat":
            self.messages = [{"role": "system", "content": "You are a friendly assistant."}]
            parts = [body[i : i + 600] for i in range(0, len(body), 600)]
            for i, part in enumerate(parts):
                role = "user" if i % 2 == 0 else "assistant"
                self.messages.append({"role": role, "content": part})
            if self.messages[-1]["role"] == "user":
                self.messages.append({"role": "assistant", "content": "I see."})
            self.messages.append({"role": "user", "content": "What did we talk about?"})
        else:
            self.messages = [
                {"role": "user", "content": "Here is a document:\n\n" + body + "\n\nSummarize it."}
            ]

    def body(self, max_tokens: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": "",
            "messages": self.messages,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.kind == "agent":
            out["tools"] = TOOLS
        return out

    def answered(self, text: str, round_no: int) -> None:
        self.messages.append({"role": "assistant", "content": text})
        self.messages.append({"role": "user", "content": f"Thanks. Next, question {round_no}?"})


@dataclass(frozen=True)
class Turn:
    client: str
    round_no: int
    prompt_tokens: int
    cached_tokens: int
    ttft_s: float
    completion_tokens: int
    decode_tok_s: float


def streamed_turn(url: str, client: Client, round_no: int, max_tokens: int) -> Turn:
    """One streamed request; its text is appended to the client's conversation."""
    data = json.dumps(client.body(max_tokens)).encode()
    request = urllib.request.Request(
        url + "/v1/chat/completions", data=data, headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    first = last = 0.0
    pieces: list[str] = []
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    n_chunks = 0
    with urllib.request.urlopen(request, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            if chunk.get("timings"):
                timings = chunk["timings"]
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    last = time.perf_counter()
                    first = first or last
                    pieces.append(piece)
                    n_chunks += 1
    client.answered("".join(pieces), round_no)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is None:
        cached = timings.get("cache_n", 0)
    completion = int(usage.get("completion_tokens") or n_chunks)
    rate = (completion - 1) / (last - first) if completion > 1 and last > first else 0.0
    return Turn(
        client.name,
        round_no,
        int(usage.get("prompt_tokens") or 0),
        int(cached or 0),
        (first or time.perf_counter()) - t0,
        completion,
        rate,
    )


def clients_a(scale: float = 1.0) -> list[Client]:
    """Traffic A: an agent (about 3k tokens), a chat (1.5k) and a document (2k)."""
    return [
        Client("agent", "agent", 1, int(2300 * scale)),
        Client("chat", "chat", 2, int(1150 * scale)),
        Client("document", "document", 3, int(1550 * scale)),
    ]


def clients_b(scale: float = 1.0) -> list[Client]:
    """Traffic B: two of each kind, six in all."""
    return [
        *clients_a(scale),
        Client("agent-2", "agent", 11, int(2300 * scale)),
        Client("chat-2", "chat", 12, int(1150 * scale)),
        Client("document-2", "document", 13, int(1550 * scale)),
    ]


def _turns_of(
    url: str, clients: list[Client], rounds: range, max_tokens: int
) -> tuple[list[Turn], list[Client]]:
    turns = [streamed_turn(url, c, r, max_tokens) for r in rounds for c in clients]
    return turns, clients


def take_turns(
    url: str, clients: list[Client], rounds: int, max_tokens: int, *, first_round: int = 1
) -> list[Turn]:
    """The clients take turns for ``rounds`` rounds, from a process of their own (as real
    clients do: their reading does not share the server's interpreter); ``clients`` are
    updated with the replies."""
    import concurrent.futures
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        span = range(first_round, first_round + rounds)
        turns, updated = pool.submit(_turns_of, url, clients, span, max_tokens).result()
    for client, new in zip(clients, updated, strict=True):
        client.messages = new.messages
    return turns


def cached_fraction(turns: list[Turn], from_round: int = 2) -> float:
    later = [t for t in turns if t.round_no >= from_round]
    prompt = sum(t.prompt_tokens for t in later)
    return sum(t.cached_tokens for t in later) / prompt if prompt else 0.0
