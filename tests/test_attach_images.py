"""Images through the application layer on the real engine: the demo model with a
synthetic projector made for its width (``bench/synthetic/synth_mmproj.py``; no small
vision GGUF with its projector ships on PyPI), real PNGs, real SQLite. An image is
encoded once: follow-ups, and a reopened app, encode none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import terminal_chat
from tests.test_attach_app import _close, _open, _turn
from vllmchat.bench.synthetic.synth_mmproj import png_bytes, write_gemma3_mmproj
from vllmchat.core.app.events import AttachmentAdded, AttachmentRejected
from vllmchat.core.conversations.events import PromptPlanEvent


@pytest.fixture(scope="module")
def projector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gemma3_mmproj(tmp_path_factory.mktemp("mmproj") / "mmproj-synth.gguf", 576)


def test_an_image_is_encoded_once_also_after_reopening(tmp_path, demo_model, projector):
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes(320, 240, seed=4))
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=2048, mmproj_path=str(projector))
    try:
        added = [e for e in app.attaching.attach(photo) if isinstance(e, AttachmentAdded)]
        assert len(added) == 1 and added[0].kind == "image" and added[0].tokens == 16
        assert "320×240" in added[0].message
        first, events = _turn(app, "What is in this picture?")
        assert first.stats.images_encoded == 1
        plan = next(e for e in events if isinstance(e, PromptPlanEvent))
        assert plan.prompt_tokens > 16
        follow, _ = _turn(app, "And its colours?")
        assert follow.stats.images_encoded == 0
        assert follow.stats.tokens_reused >= first.stats.prompt_tokens
    finally:
        _close(app)
    app, _, loaded = _open(tmp_path, demo_model, conv, n_ctx=2048, mmproj_path=str(projector))
    try:
        assert loaded.restored_tokens > 16
        again, _ = _turn(app, "Is it a photo?")
        assert again.stats.images_encoded == 0, again.stats
        user = [m for m in app.store.path(conv) if m.role == "user"]
        kept = app.attachments.of_messages([user[0].id])[user[0].id]
        assert kept[0].kind == "image" and kept[0].data == photo.read_bytes()
    finally:
        _close(app)


def test_an_image_without_vision_is_refused_and_nothing_changes(tmp_path, demo_model):
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8\xff\xe0" + bytes(200))
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=512)
    try:
        rejected = [e for e in app.attaching.attach(photo) if isinstance(e, AttachmentRejected)]
        assert len(rejected) == 1 and rejected[0].reason == "image_needs_vision"
        assert "cannot see images" in rejected[0].message
        assert "projector" in rejected[0].message
        assert app.attachments.pending(conv) == []
    finally:
        _close(app)


def test_an_image_left_out_by_keep_last_is_not_sent(tmp_path, demo_model, projector):
    """The engine refuses a turn whose images and markers differ, so a turn answered
    after the image's message was left out shows its image was left out too."""
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes(64, 64, seed=5))
    app, conv, _ = _open(
        tmp_path,
        demo_model,
        n_ctx=512,
        mmproj_path=str(projector),
        mode="keep_last",
        keep_last_turns=1,
    )
    try:
        list(app.attaching.attach(photo))
        first, _ = _turn(app, "Look.")
        assert first.stats.images_encoded == 1
        dropped = 0
        for n in range(4):
            done, events = _turn(app, f"Part {n}: " + "tea and apples " * 50)
            plan = next(e for e in events if isinstance(e, PromptPlanEvent))
            dropped = max(dropped, plan.dropped_messages)
            assert done.stats.images_encoded == 0
        assert dropped >= 2
        session = app.session
        assert session is not None
        path = app.store.path(conv)
        prompt, _ = session._keep_last(path, session.plan(path)[1])
        assert not any("<__media__>" in m["content"] for m in prompt)
    finally:
        _close(app)


def test_the_terminal_attaches_an_image(tmp_path, demo_model, projector):

    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes(96, 64, seed=6))
    proc = terminal_chat(
        f"/attach {photo}\nWhat is in it?\n/quit\n",
        "--n-ctx",
        "1024",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--model",
        str(demo_model),
        "--mmproj-path",
        str(projector),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[attached photo.png: photo.png (96×64, 16 tokens)" in proc.stdout
    assert proc.stdout.count("ai> ") == 1 and "error" not in proc.stdout
