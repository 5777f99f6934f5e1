"""A marker typed by the user (llama.cpp's mtmd default marker) is plain text, and a
turn with images offers the conversation's tools. Real demo model, a synthetic
projector made for its width (no small vision GGUF ships on PyPI), real PNGs, real
SQLite, a real MCP server over stdio."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_attach_app import _close, _open, _turn
from tests.tool_configs import server, write_config
from vllmchat.bench.synthetic.synth_mmproj import png_bytes, write_gemma3_mmproj
from vllmchat.core.app.events import AttachmentAdded
from vllmchat.core.app.tools.turns import ToolTurn
from vllmchat.core.engine.events import ErrorEvent
from vllmchat.core.engine.images import MEDIA_MARKER
from vllmchat.core.engine.media_text import NEUTRAL_MARKER, neutralise
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.tools.approval import ApprovalPolicy
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ToolCall,
    ToolCallFinished,
    ToolInfo,
    ToolResult,
)

TYPED = f"What does {MEDIA_MARKER} mean in llama.cpp?"


@pytest.fixture(scope="module")
def projector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gemma3_mmproj(tmp_path_factory.mktemp("mmproj") / "mmproj-synth.gguf", 576)


def test_the_neutral_marker_reads_the_same_but_is_not_the_marker() -> None:
    assert neutralise(TYPED) != TYPED and MEDIA_MARKER not in neutralise(TYPED)
    assert neutralise(TYPED).replace("\u2060", "") == TYPED
    assert NEUTRAL_MARKER in neutralise(MEDIA_MARKER * 2 + "x")
    assert neutralise("plain") == "plain"


def test_a_typed_marker_without_images_is_answered_and_stored_as_typed(tmp_path, demo_model):
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=1024)
    try:
        done, events = _turn(app, TYPED)
        assert not [e for e in events if isinstance(e, ErrorEvent)]
        assert done.stats.prompt_tokens > 10
        user = [m for m in app.store.path(conv) if m.role == "user"]
        assert user[0].content == TYPED  # the store keeps what was typed
    finally:
        _close(app)


def test_a_typed_marker_beside_an_image_and_in_a_document_counts_no_image(
    tmp_path, demo_model, projector
):
    """The engine refuses a turn whose markers and images differ: a reply shows that
    only the app's marker (one, for the one image) reached it."""
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes(64, 64, seed=3))
    notes = tmp_path / "notes.md"
    notes.write_text(f"# Markers\n\nmtmd places an image where {MEDIA_MARKER} stands.\n")
    app, conv, _ = _open(tmp_path, demo_model, n_ctx=2048, mmproj_path=str(projector))
    try:
        added = [e for e in app.attaching.attach(photo) if isinstance(e, AttachmentAdded)]
        added += [e for e in app.attaching.attach(notes) if isinstance(e, AttachmentAdded)]
        assert [a.kind for a in added] == ["image", "document"]
        done, events = _turn(app, TYPED + " " + MEDIA_MARKER)
        assert not [e for e in events if isinstance(e, ErrorEvent)], events
        assert done.stats.images_encoded == 1
        follow, events = _turn(app, f"Again: {MEDIA_MARKER}?")
        assert not [e for e in events if isinstance(e, ErrorEvent)], events
        assert follow.stats.images_encoded == 0
        session = app.session
        assert session is not None
        prompt, _ = session.plan(app.store.path(conv))
        assert sum(m["content"].count(MEDIA_MARKER) for m in prompt) == 1
        assert sum(m["content"].count(NEUTRAL_MARKER) for m in prompt) >= 4
    finally:
        _close(app)


def test_a_turn_with_an_image_offers_the_tools(tmp_path, demo_model, projector):
    """SmolLM2's template has no tool format: the call is grammar-constrained
    (``tool_choice="required"``), then answered in plain text; both steps send the image,
    which only the first encodes."""
    photo = tmp_path / "sum.png"
    photo.write_bytes(png_bytes(96, 64, seed=8))
    app, conv, _ = _open(
        tmp_path, demo_model, n_ctx=2048, mmproj_path=str(projector), max_tokens=48
    )
    try:
        assert (
            app.use_tools(write_config(tmp_path, {"demo": server()}), tool_choice="required")
            is None
        )
        app.tools.start_all(timeout_s=60)
        list(app.attaching.attach(photo))
        events = []
        for event in app.send("What is 2 plus 40? Use the picture too."):
            events.append(event)
            if isinstance(event, ApprovalNeeded):
                event.answer.set_result(Approval("once"))
        assert not [e for e in events if isinstance(e, ErrorEvent)], events
        asked = [e for e in events if isinstance(e, ApprovalNeeded)]
        finished = [e for e in events if isinstance(e, ToolCallFinished)]
        assert len(asked) == 1 and asked[0].call.name.startswith("demo_")
        assert finished and finished[0].result.call.name == asked[0].call.name
        stats = [e.stats for e in events if type(e).__name__ == "StatsEvent"]
        assert [s.images_encoded for s in stats] == [1, 0], stats
        reply = app.store.path(conv)[-1]
        assert reply.role == "assistant" and not reply.partial
    finally:
        app.tools.close()
        _close(app)


def test_a_tool_result_holding_the_marker_is_plain_text(make_client, demo_model, projector):
    """The tool's run is a local function here (the result's text is what matters: a
    server returning the marker is not something the test servers do)."""
    client = make_client()
    client.load(
        LoadSettings(
            model_path=str(demo_model), n_ctx=2048, n_threads=2, mmproj_path=str(projector)
        )
    )
    tool = ToolInfo("demo", "look", "Look at something.", {"type": "object", "properties": {}})

    def run(info: ToolInfo, call: ToolCall) -> ToolResult:
        return ToolResult(call, "ok", f"It shows {MEDIA_MARKER} twice: {MEDIA_MARKER}.")

    turn = ToolTurn(client, [tool], run, ApprovalPolicy(), "m1", tool_choice="required")
    messages = [{"role": "user", "content": f"{MEDIA_MARKER}\nLook at this picture."}]
    gen = turn.run(
        messages, SamplingSettings(temperature=0.0, max_tokens=24), [png_bytes(64, 48, seed=2)]
    )
    events = []
    try:
        while True:
            event = next(gen)
            events.append(event)
            if isinstance(event, ApprovalNeeded):
                event.answer.set_result(Approval("once"))
    except StopIteration as stop:
        done = stop.value
    assert done.error is None, done.error
    assert len(done.step_stats) == 2 and done.results[0].ok
    assert [s.images_encoded for s in done.step_stats] == [1, 0]
    result = next(m for m in done.added if m["content"].startswith("Result of"))
    assert result["content"].count(NEUTRAL_MARKER) == 2
