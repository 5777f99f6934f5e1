"""Bad input around documents and images, said clearly: a document over the context of a
model trained for too short a context, and an image for a model without vision in the
terminal (real demo model, real subprocess)."""

from __future__ import annotations

import pytest

from tests.helpers import terminal_chat
from vllmchat.bench.synthetic.synth_mmproj import png_bytes
from vllmchat.core.attachments.errors import NoRoom
from vllmchat.core.attachments.prompt import fit_document


def test_a_model_trained_for_a_short_context_is_said_too_small_for_passages() -> None:
    with pytest.raises(NoRoom) as raised:
        fit_document(
            "c.pdf",
            9000,
            prompt_tokens=0,
            budget=256,
            n_ctx=512,
            chunk_tokens=300,
            n_ctx_train=1024,
        )
    said = raised.value.message
    assert "trained for at most 1,024 tokens" in said and "longer context" in said
    with pytest.raises(NoRoom) as raised:
        fit_document(
            "c.pdf",
            9000,
            prompt_tokens=0,
            budget=256,
            n_ctx=512,
            chunk_tokens=300,
            n_ctx_train=8192,
        )
    assert "Load the model with a larger context (n_ctx 2,048" in raised.value.message


def test_the_terminal_says_how_to_start_a_model_that_sees_images(tmp_path, demo_model):
    photo = tmp_path / "photo.png"
    photo.write_bytes(png_bytes(40, 30, seed=2))
    proc = terminal_chat(
        f"/attach {photo}\n/quit\n",
        "--n-ctx",
        "512",
        "--max-tokens",
        "4",
        "--temperature",
        "0",
        "--model",
        str(demo_model),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "cannot see images" in proc.stdout
    assert "`vllmchat models` marks" in proc.stdout and "--mmproj-path" in proc.stdout


def test_a_document_is_measured_in_a_new_conversation_on_a_gemma_template(
    tmp_path, tiny_models
) -> None:
    """Gemma's template reads ``messages[0]``: a new conversation without a system prompt
    has no prompt to render, so it counts as none (a tiny llama carrying that template)."""
    from tests.test_attach_app import _close, _open
    from vllmchat.core.app.events import AttachmentAdded

    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe boat is called Marisol.\n")
    app, _, _ = _open(tmp_path, tiny_models["gemma"], n_ctx=512, system_prompt="")
    try:
        events = list(app.attaching.attach(notes))
        assert isinstance(events[-1], AttachmentAdded), events
        assert events[-1].mode == "whole"
    finally:
        _close(app)
