"""``vllmchat bench attach``: a document is prefilled once; a large one is retrieved from.

On the demo model at n_ctx 8192, through the application layer (``ChatApp``):

- ``doc_followup_ttft_ratio``: first-token time of a second question about a ~6k-token
  document ÷ that of the first question, which prefilled it (target ≤ 0.05);
- ``doc_restart_ttft_ratio``: the same follow-up after the app was closed and opened
  again (the conversation's saved KV state holds the document; target ≤ 0.10);
- ``retrieval_recall_at_k``: for a document five times the context with 20 planted
  sentences, the share of questions whose passages hold the planted sentence. The
  questions are written as a user would: they share a key word or two with the
  sentence, not its wording. This measures the pipeline, not the model's answer;
- ``retrieval_recall_at_k_hybrid``: the same with an embedding model set, FTS5 and
  cosine fused by reciprocal rank (``hybrid_index_s``: embedding the archive's chunks,
  once); the embedding model is ``--embedding-model``, else the chat model's GGUF in
  llama.cpp's embedding mode (no small embedding GGUF ships on PyPI);
- ``attach_messages_lost``: messages missing after the attachments, the refused files
  (a scan, a locked PDF, a binary ``.txt``, a 200 MB file) and the restart (target 0);
- ``image_followup_encodes`` and ``image_restart_encodes``: images encoded by a
  follow-up about an attached image, and by a question after the app was closed and
  opened again (target 0 and 0); the demo model sees through a synthetic projector
  made for its width (``bench/synthetic/synth_mmproj.py``), null for other models.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import AttachmentAdded, AttachmentRejected
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, StatsEvent, TokenEvent

N_CTX = 8192
# (the planted sentence, the question a user would ask about it)
PLANTED = [
    (
        "The lighthouse keeper on Varrow Island repainted the front door teal in 1987.",
        "What colour is the lighthouse door?",
    ),
    (
        "Saffron from the Kessel valley is harvested by hand at dawn in late October.",
        "When do they pick the saffron?",
    ),
    (
        "The orchestra's oldest cello was built in Cremona by a pupil of Amati.",
        "Where did the cello come from?",
    ),
    (
        "Our warehouse in Tilburg keeps 4,200 pallets of ceramic tiles.",
        "How many pallets are in the Tilburg warehouse?",
    ),
    (
        "Professor Okafor proved the conjecture using a lattice of hexagonal tilings.",
        "How did Okafor prove it?",
    ),
    (
        "The night train to Kraków leaves platform nine at 22:47.",
        "Which platform does the Kraków train use?",
    ),
    ("A colony of puffins nests on the northern cliffs every May.", "When do the puffins come?"),
    (
        "The vault's combination was changed to 31-07-44 after the burglary.",
        "What is the new vault combination?",
    ),
    (
        "Marisol's bakery sells rye sourdough only on Thursdays.",
        "Which day can I buy sourdough at the bakery?",
    ),
    (
        "The glacier retreated 38 metres during the unusually warm summer.",
        "How far did the glacier shrink?",
    ),
    (
        "Engineers replaced the bridge cables with galvanised steel strands.",
        "What are the new bridge cables made of?",
    ),
    (
        "The chess club meets in the basement of the old observatory.",
        "Where does the chess club gather?",
    ),
    (
        "Captain Ilves logged a waterspout near the Faroe Islands on 3 June.",
        "What did the captain see near the Faroes?",
    ),
    (
        "The museum's jade dragon was insured for nine million euros.",
        "What is the jade dragon worth?",
    ),
    (
        "Beekeepers in the valley switched to heather honey after the drought.",
        "What honey do the beekeepers make now?",
    ),
    (
        "The submarine cable between the islands failed because of an anchor strike.",
        "Why did the undersea cable break?",
    ),
    (
        "The violinist tunes her instrument a quarter tone flat for baroque pieces.",
        "How does the violinist tune for baroque music?",
    ),
    ("Our accountant found the missing invoice inside a cookbook.", "Where was the lost invoice?"),
    (
        "The tortoise at the zoo celebrated its 126th birthday with hibiscus flowers.",
        "How old is the zoo tortoise?",
    ),
    (
        "Snow chains are mandatory on the pass road from November to April.",
        "When do I need chains on the pass?",
    ),
]
_SUBJECTS = [
    "The committee",
    "Our team",
    "The council",
    "A visitor",
    "The report",
    "The manager",
    "Each department",
    "The new policy",
    "The survey",
    "Most residents",
    "The author",
    "An engineer",
    "The board",
    "Local farmers",
    "The study",
]
_VERBS = [
    "reviewed",
    "discussed",
    "described",
    "questioned",
    "summarised",
    "improved",
    "postponed",
    "measured",
    "compared",
    "welcomed",
    "criticised",
    "planned",
]
_OBJECTS = [
    "the quarterly figures",
    "the schedule for next year",
    "the parking rules",
    "the results of the pilot",
    "several open questions",
    "the budget for repairs",
    "the training programme",
    "the state of the roads",
    "the weekly timetable",
    "the list of suppliers",
    "the opening hours",
    "the safety guidelines",
    "the annual meeting",
    "the shared calendar",
    "the heating costs",
]
_ENDS = [
    "before the holidays.",
    "in some detail.",
    "with mixed feelings.",
    "once again.",
    "at the last meeting.",
    "without much debate.",
    "for the second time.",
    "after a long delay.",
    "as expected.",
    "with care.",
]


def filler(rng: random.Random, sentences: int) -> list[str]:
    """Plausible, dull prose: paragraphs of five sentences."""
    out = []
    for _ in range(sentences // 5):
        out.append(
            " ".join(
                f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} "
                f"{rng.choice(_OBJECTS)} {rng.choice(_ENDS)}"
                for _ in range(5)
            )
        )
    return out


def handbook(path: Path, sentences: int, seed: int = 7) -> Path:
    """A Markdown handbook of ``sentences`` filler sentences under headings."""
    rng = random.Random(seed)
    parts = filler(rng, sentences)
    lines = ["# Staff handbook", ""]
    for n, paragraph in enumerate(parts):
        if n % 8 == 0:
            lines += [f"## Chapter {n // 8 + 1}", ""]
        lines += [paragraph, ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


ENGINE_TTFT: list[float] = []  # the engine's own first-token times, turn by turn


def _ttft(app: ChatApp, text: str) -> tuple[float, int]:
    """Seconds from sending ``text`` to its first token, and the tokens prefilled."""
    t0 = time.perf_counter()
    first, prefilled = 0.0, -1
    for event in app.send(text):
        if isinstance(event, TokenEvent) and not first:
            first = time.perf_counter() - t0
        elif isinstance(event, StatsEvent):
            prefilled = event.stats.tokens_prefilled
            ENGINE_TTFT.append(round(event.stats.ttft_s, 4))
        elif isinstance(event, DoneEvent) and not first:
            first = time.perf_counter() - t0
            prefilled = event.stats.tokens_prefilled
        elif isinstance(event, ErrorEvent):
            raise RuntimeError(event.message)
    return first, prefilled


def _open(folder: Path, model: str, conversation: int | None, **load: Any) -> tuple[ChatApp, int]:
    store = ConversationStore(folder / "c.sqlite3")
    app = ChatApp(store, KVStateCache(folder / "kv"))
    conv = conversation if conversation is not None else store.create().id
    app.open_conversation(conv)
    settings = AppSettings.of(
        model_path=model, n_ctx=N_CTX, n_threads=2, temperature=0.0, max_tokens=8, **load
    )
    for event in app.load(settings):
        if type(event).__name__ == "LoadFailed":
            raise RuntimeError(str(event))
    return app, conv


def _close(app: ChatApp) -> None:
    app.shutdown()
    app.store.close()


def _attach(app: ChatApp, path: Path) -> AttachmentAdded | AttachmentRejected:
    events = [
        e for e in app.attaching.attach(path) if isinstance(e, AttachmentAdded | AttachmentRejected)
    ]
    return events[-1]


def _bad_files(folder: Path) -> list[Path]:
    from vllmchat.bench.synthetic.pdf_writer import write_pdf

    binary = folder / "tool.txt"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 16)
    huge = folder / "huge.txt"
    with huge.open("wb") as f:
        f.truncate(200 << 20)
    return [
        write_pdf(folder / "scan.pdf", ["", ""], scanned=True),
        write_pdf(folder / "locked.pdf", ["Secret."], password="pw"),
        binary,
        huge,
    ]


def _whole(folder: Path, model: str) -> dict[str, Any]:
    doc = handbook(folder / "handbook.md", 530)  # about 6,000 tokens
    app, conv = _open(folder, model, None)
    refused = [_attach(app, bad) for bad in _bad_files(folder)]
    added = _attach(app, doc)
    if not isinstance(added, AttachmentAdded) or added.mode != "whole":
        raise RuntimeError(f"the handbook did not go whole: {added}")
    first, first_prefill = _ttft(app, "What does chapter 3 of the handbook discuss?")
    follow, follow_prefill = _ttft(app, "And what about chapter 5?")
    _close(app)
    app, _ = _open(folder, model, conv)
    restart, restart_prefill = _ttft(app, "Which chapter mentions the heating costs?")
    store = app.store
    users = [m for m in store.path(conv) if m.role == "user"]
    replies = [m for m in store.path(conv) if m.role == "assistant"]
    kept = app.attachments.of_messages([m.id for m in users])
    lost = (3 - len(users)) + (3 - len(replies)) + (0 if kept.get(users[0].id) else 1)
    _close(app)
    return {
        "doc_tokens": added.tokens,
        "doc_first_ttft_s": round(first, 3),
        "doc_first_prefill_tokens": first_prefill,
        "doc_followup_ttft_s": round(follow, 4),
        "doc_followup_prefill_tokens": follow_prefill,
        "doc_followup_ttft_ratio": round(follow / first, 4),
        "doc_restart_ttft_s": round(restart, 4),
        "doc_restart_prefill_tokens": restart_prefill,
        "doc_restart_ttft_ratio": round(restart / first, 4),
        "doc_engine_ttft_s": ENGINE_TTFT[-3:],  # first, follow-up, after the restart
        "bad_files_refused": sum(isinstance(r, AttachmentRejected) for r in refused),
        "bad_file_reasons": [r.reason for r in refused if isinstance(r, AttachmentRejected)],
        "attach_messages_lost": lost,
    }


def _recall(folder: Path, model: str, embedding_model: str = "") -> dict[str, Any]:
    rng = random.Random(11)
    paragraphs = filler(rng, 3700)  # about five contexts of 8192 tokens
    spots = sorted(rng.sample(range(len(paragraphs)), len(PLANTED)))
    for spot, (sentence, _) in zip(spots, PLANTED, strict=True):
        words = paragraphs[spot].split(". ")
        words.insert(2, sentence.rstrip("."))
        paragraphs[spot] = ". ".join(words)
    path = folder / "archive.md"
    path.write_text("# Archive\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    app, _ = _open(folder / "recall", model, None)
    try:
        added = _attach(app, path)
        if not isinstance(added, AttachmentAdded) or added.mode != "retrieval":
            raise RuntimeError(f"the archive is not answered from passages: {added}")
        list(app.send("Here is the archive."))
        found, k = 0, 0
        for sentence, question in PLANTED:
            hits = app.attaching.passages_for(question)
            k = max(k, len(hits))
            found += any(sentence[:40] in h.text for h in hits)
        return {
            "recall_doc_tokens": added.tokens,
            "recall_k": k,
            "retrieval_recall_at_k": round(found / len(PLANTED), 3),
            **_hybrid_recall(app, embedding_model or model),
        }
    finally:
        _close(app)


def _hybrid_recall(app: ChatApp, embedding_model: str) -> dict[str, Any]:
    """Recall with FTS5 and embeddings fused; the archive's chunks embedded first."""
    list(app.configure(embedding_model=embedding_model))
    t0 = time.perf_counter()
    app.attaching.passages_for("archive")  # embeds every chunk, once
    index_s = time.perf_counter() - t0
    found = 0
    for sentence, question in PLANTED:
        found += any(sentence[:40] in h.text for h in app.attaching.passages_for(question))
    return {
        "embedding_model": Path(embedding_model).name,
        "hybrid_index_s": round(index_s, 1),
        "retrieval_recall_at_k_hybrid": round(found / len(PLANTED), 3),
    }


def run(
    *, model: str | None = None, quick: bool = False, embedding_model: str | None = None
) -> dict[str, Any]:
    path = model or str(demo_model_path())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "recall").mkdir()
        result: dict[str, Any] = {"model": Path(path).name, "n_ctx": N_CTX}
        result.update(_whole(folder, path))
        result.update(_recall(folder, path, embedding_model or ""))
        result.update(_images(folder / "images", path))
    return result


def _encoded(app: ChatApp, text: str) -> int:
    done = [e for e in app.send(text) if isinstance(e, DoneEvent | ErrorEvent)]
    if not done or isinstance(done[-1], ErrorEvent):
        raise RuntimeError(f"the image turn failed: {done}")
    return done[-1].stats.images_encoded


def _images(folder: Path, model: str) -> dict[str, Any]:
    """Images encoded by the first question about an image, a follow-up and a question
    after a restart (null for a model the synthetic projector is not made for)."""
    from vllmchat.bench.synthetic.synth_mmproj import png_bytes, write_gemma3_mmproj

    none = {
        "image_first_encodes": None,
        "image_followup_encodes": None,
        "image_restart_encodes": None,
    }
    if Path(model).resolve() != demo_model_path().resolve():
        return none
    folder.mkdir()
    projector = str(write_gemma3_mmproj(folder / "mmproj-synth.gguf", 576))
    photo = folder / "photo.png"
    photo.write_bytes(png_bytes(320, 240, seed=1))
    app, conv = _open(folder, model, None, mmproj_path=projector)
    try:
        if not isinstance(_attach(app, photo), AttachmentAdded):
            return none
        first = _encoded(app, "What is in this picture?")
        follow = _encoded(app, "And its colours?")
    finally:
        _close(app)
    app, _ = _open(folder, model, conv, mmproj_path=projector)
    try:
        restart = _encoded(app, "Is it a photo?")
    finally:
        _close(app)
    return {
        "image_first_encodes": first,
        "image_followup_encodes": follow,
        "image_restart_encodes": restart,
    }
