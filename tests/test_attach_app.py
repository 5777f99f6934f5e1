"""Documents through the application layer on the real demo model: a document that fits
is prefilled once (follow-ups and a reopened app prefill only the question), a large one
is answered from passages that the reply records, bad files lose nothing."""

from __future__ import annotations

from pathlib import Path

from vllmchat.bench.conversations.attach_bench import PLANTED, filler, handbook
from vllmchat.bench.synthetic.pdf_writer import write_pdf
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import AttachmentAdded, AttachmentRejected, Loaded
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import PassagesUsed, PromptPlanEvent
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent


def _open(tmp_path: Path, model: Path, conversation: int | None = None, **settings: object):
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"))
    conv = conversation if conversation is not None else store.create().id
    app.open_conversation(conv)
    flat = {
        "model_path": str(model),
        "n_threads": 2,
        "temperature": 0.0,
        "max_tokens": 8,
        **settings,
    }
    loaded = [e for e in app.load(AppSettings.of(**flat)) if isinstance(e, Loaded)]
    assert loaded
    return app, conv, loaded[0]


def _close(app: ChatApp) -> None:
    app.shutdown()
    app.store.close()


def _turn(app: ChatApp, text: str) -> tuple[DoneEvent, list[object]]:
    events = list(app.send(text))
    done = [e for e in events if isinstance(e, DoneEvent)]
    assert done, events
    return done[-1], events


def test_a_document_that_fits_is_prefilled_once_also_after_reopening(tmp_path, demo_model):
    doc = handbook(tmp_path / "handbook.md", 120)
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=4096)
    try:
        added = [e for e in app.attaching.attach(doc) if isinstance(e, AttachmentAdded)]
        assert added and added[0].mode == "whole" and added[0].tokens > 1000
        tokens = added[0].tokens
        first, events = _turn(app, "What does chapter 2 say?")
        plan = next(e for e in events if isinstance(e, PromptPlanEvent))
        assert plan.document_tokens == tokens
        assert first.stats.tokens_prefilled > tokens
        follow, _ = _turn(app, "And chapter 3?")
        assert follow.stats.tokens_prefilled < 40, follow.stats
        assert follow.stats.tokens_reused > tokens
    finally:
        _close(app)
    app, _, loaded = _open(tmp_path, demo_model, conv, n_ctx=4096)
    try:
        assert loaded.restored_tokens > tokens
        again, _ = _turn(app, "Which chapter is the longest?")
        assert again.stats.tokens_prefilled < 40, again.stats
        user = [m for m in app.store.path(conv) if m.role == "user"]
        assert len(user) == 3
        kept = app.attachments.of_messages([user[0].id])[user[0].id]
        assert kept[0].name == "handbook.md" and kept[0].text == doc.read_text()
    finally:
        _close(app)


def test_a_large_document_is_answered_from_passages(tmp_path, demo_model):
    import random

    paragraphs = filler(random.Random(3), 600)
    sentence, question = PLANTED[0]
    paragraphs[77] += " " + sentence
    path = tmp_path / "archive.md"
    path.write_text("# Archive\n\n" + "\n\n".join(paragraphs))
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=2048)
    try:
        added = [e for e in app.attaching.attach(path) if isinstance(e, AttachmentAdded)]
        assert added and added[0].mode == "retrieval"
        done, events = _turn(app, question)
        used = [e for e in events if isinstance(e, PassagesUsed)]
        assert used and any("Varrow" in h.text for h in used[0].passages)
        reply = app.store.path(conv)[-1]
        assert reply.role == "assistant" and used[0].message_id == reply.id
        assert [h.chunk_id for h in app.attachments.used_by(reply.id)] == [
            h.chunk_id for h in used[0].passages
        ]
        plan = next(e for e in events if isinstance(e, PromptPlanEvent))
        assert plan.prompt_tokens <= 2048 - 8
        assert done.stats.prompt_tokens > 300  # the passages were in the prompt
    finally:
        _close(app)


def test_bad_files_and_a_context_too_small_lose_nothing(tmp_path, demo_model):
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=512)
    try:
        _turn(app, "Hello")
        before = app.store.path(conv)
        scan = write_pdf(tmp_path / "scan.pdf", ["", ""], scanned=True)
        locked = write_pdf(tmp_path / "locked.pdf", ["Secret."], password="pw")
        binary = tmp_path / "tool.txt"
        binary.write_bytes(b"\x7fELF" + bytes(range(256)) * 4)
        huge = tmp_path / "huge.txt"
        with huge.open("wb") as f:
            f.truncate(200 << 20)
        big = handbook(tmp_path / "big.md", 600)
        reasons = []
        for path in (scan, locked, binary, huge, big, tmp_path / "missing.txt"):
            rejected = [e for e in app.attaching.attach(path) if isinstance(e, AttachmentRejected)]
            assert len(rejected) == 1, path
            reasons.append(rejected[0].reason)
        assert reasons == ["scanned_pdf", "password", "not_text", "too_large", "no_room", "missing"]
        assert "vision" in next(iter(app.attaching.attach(scan))).message  # type: ignore[attr-defined]
        assert app.store.path(conv) == before
        assert app.attachments.pending(conv) == []
        old = tmp_path / "old.txt"
        old.write_bytes("Caf\xe9 cr\xe8me".encode("cp1252"))
        added = [e for e in app.attaching.attach(old) if isinstance(e, AttachmentAdded)]
        assert added and "so it was read as Windows-1252" in added[0].message, (
            "the encoding is said"
        )
    finally:
        _close(app)


def test_a_document_message_is_never_summarized_away(tmp_path, demo_model):
    doc = tmp_path / "recipe.txt"
    doc.write_text("Grandma's recipe: three eggs, saffron, 200 g of flour.\n")
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=2048, keep_last_turns=1)
    try:
        list(app.attaching.attach(doc))
        for text in ("Read this.", "Thanks.", "More?", "Bye."):
            _turn(app, text)
        session = app.session
        assert session is not None
        path = session.store.path(conv)
        old = session.summaries.to_summarize(path)
        assert path[0] in old
        assert path[0] not in session.summaries.summary_input(old)  # kept word for word instead
        app.store.add_summary(conv, "They chatted.", old[0].id, old[-1].id)
        prompt, _ = session.plan(path)
        assert "saffron, 200 g of flour" in prompt[0]["content"]
    finally:
        _close(app)
