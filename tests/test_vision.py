"""Images through the real engine process: the demo model (SmolLM2-135M) with a synthetic
Gemma 3-shaped projector made for its width (``bench/synthetic/synth_mmproj.py``; no small vision
GGUF with its projector ships on PyPI), real PNGs, llama.cpp's mtmd library."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import done, error, stats_of
from vllmchat.bench.synthetic.synth_mmproj import VisionShape, png_bytes, write_gemma3_mmproj
from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.images import MAX_IMAGE_SIDE, MEDIA_MARKER
from vllmchat.core.settings import LoadSettings, SamplingSettings

GREEDY = SamplingSettings(temperature=0.0, max_tokens=8, speculation="off")
SHAPE = VisionShape()


@pytest.fixture(scope="session")
def projector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A projector made for the demo model's width (576)."""
    return write_gemma3_mmproj(tmp_path_factory.mktemp("mmproj") / "mmproj-synth.gguf", 576)


@pytest.fixture
def vision_settings(demo_model: Path, projector: Path) -> LoadSettings:
    return LoadSettings(
        model_path=str(demo_model), mmproj_path=str(projector), n_ctx=2048, n_threads=2
    )


def _turn(client, messages, images):
    events = list(client.chat(messages, GREEDY, ChatOptions(images=images)))
    return done(events), stats_of(events)


def _ask(client, *images):
    """The events of a first question about ``images``."""
    return list(client.chat(_first(), GREEDY, ChatOptions(images=images)))


def _first(question: str = "What is in this picture?") -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{MEDIA_MARKER}\n{question}"}]


def test_an_image_is_encoded_once_and_reused_from_the_kv_cache(make_client, vision_settings):
    client = make_client()
    info = client.load(vision_settings)
    assert client.capabilities.vision and info.vision
    assert info.image_tokens == SHAPE.image_tokens == 16
    picture = png_bytes(320, 240, seed=1)
    messages = _first()
    reply, stats = _turn(client, messages, [picture])
    assert stats.images_encoded == 1
    assert stats.image_tokens == 16
    assert stats.prompt_tokens > 16

    messages += [
        {"role": "assistant", "content": reply.text},
        {"role": "user", "content": "And its colours?"},
    ]
    _, follow = _turn(client, messages, [picture])
    assert follow.images_encoded == 0
    assert follow.image_tokens == 0
    assert follow.tokens_reused >= stats.prompt_tokens

    other = [{"role": "user", "content": f"{MEDIA_MARKER}\nWhat is in this picture?"}]
    _, changed = _turn(client, other, [png_bytes(320, 240, seed=2)])
    assert changed.images_encoded == 1  # another image at the same place
    assert changed.tokens_reused < stats.prompt_tokens - 16


def test_the_saved_state_brings_images_back_after_a_restart(make_client, vision_settings, tmp_path):
    picture = tmp_path / "photo.png"
    picture.write_bytes(png_bytes(200, 300, seed=3))
    first = make_client()
    first.load(vision_settings)
    messages = _first()
    reply, stats = _turn(first, messages, [str(picture)])  # a path, read by the engine
    assert stats.images_encoded == 1
    saved = first.export_state(str(tmp_path / "conv.kv"))
    first.close()

    fresh = make_client()
    fresh.load(vision_settings)
    assert fresh.import_state(str(tmp_path / "conv.kv")).tokens == saved.tokens
    fresh.remember_replies([(reply.text, reply.token_ids)])
    messages += [
        {"role": "assistant", "content": reply.text},
        {"role": "user", "content": "Describe it again."},
    ]
    _, follow = _turn(fresh, messages, [picture.read_bytes()])
    assert follow.images_encoded == 0
    assert follow.tokens_reused >= stats.prompt_tokens


def test_an_oversized_image_is_scaled_down_keeping_its_ratio(make_client, vision_settings):
    import numpy as np

    from vllmchat.core.engine.process.llama.llama_adapter import shrink

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(1500, 3000, 3), dtype=np.uint8)
    small = shrink(pixels, MAX_IMAGE_SIDE)
    assert small.shape == (512, 1024, 3)
    assert abs(float(small.mean()) - float(pixels.mean())) < 1.0  # area averaging
    assert shrink(pixels[:100, :200], MAX_IMAGE_SIDE).shape == (100, 200, 3)

    client = make_client()
    info = client.load(vision_settings)
    assert info.image_max_side == MAX_IMAGE_SIDE
    _, stats = _turn(client, _first(), [png_bytes(3000, 1500, seed=4)])
    assert stats.images_encoded == 1 and stats.image_tokens == 16


def test_an_image_to_a_model_without_vision_is_refused_with_the_reason(
    make_client, demo_model, vision_settings, tmp_path
):
    client = make_client()
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=2048, n_threads=2))
    assert not client.capabilities.vision
    events = _ask(client, png_bytes(64, 64))
    failed = error(events)
    assert failed.kind == ErrorKind.NO_VISION and "projector" in failed.message

    from vllmchat.core.engine import requests as rq

    with pytest.raises(EngineError) as refused:  # the engine itself refuses too
        client.call(rq.Render(_first(), [png_bytes(64, 64)]))
    assert refused.value.kind == ErrorKind.NO_VISION

    seeing = make_client()
    seeing.load(vision_settings)
    events = _ask(seeing, png_bytes(64, 64), png_bytes(64, 64))
    assert error(events).kind == ErrorKind.BAD_REQUEST  # two images, one marker
    events = _ask(seeing, b"this is not an image")
    assert "could not be read" in error(events).message
    events = _ask(seeing, str(tmp_path / "gone.png"))
    assert "gone.png cannot be read" in error(events).message
    done(_ask(seeing, png_bytes(64, 64)))  # nothing was lost
    done(list(seeing.chat(_first(), GREEDY)))  # a marker typed with no image is text


def test_a_projector_for_another_model_is_refused_with_the_mismatch(
    make_client, demo_model, tmp_path
):
    other = write_gemma3_mmproj(tmp_path / "mmproj-other.gguf", 2048)
    client = make_client()
    with pytest.raises(EngineError) as refused:
        client.load(LoadSettings(model_path=str(demo_model), mmproj_path=str(other), n_ctx=512))
    assert "n_embd 2048" in refused.value.message and "n_embd 576" in refused.value.message
    assert refused.value.kind == ErrorKind.BAD_REQUEST and "mmproj" in refused.value.fix

    # A projector whose header claims the right width: llama.cpp's own check refuses it.
    silent = write_gemma3_mmproj(tmp_path / "mmproj-lying.gguf", 2048, declared_width=576)
    with pytest.raises(EngineError) as refused:
        client.load(LoadSettings(model_path=str(demo_model), mmproj_path=str(silent), n_ctx=512))
    assert "mismatch" in refused.value.message and "2048" in refused.value.message
    assert "576" in refused.value.message
    info = client.load(LoadSettings(model_path=str(demo_model), n_ctx=512))  # nothing held
    assert not info.vision


def test_the_media_marker_is_mtmds_own():
    from vllmchat.core.engine.process.llama.llama_adapter import media_marker, mtmd_missing

    assert mtmd_missing() == []
    assert media_marker() == MEDIA_MARKER


@pytest.mark.parametrize("flash_attn", [True, False])
def test_the_projector_estimate_matches_what_llama_cpp_reserves(
    make_client, demo_model, tmp_path, flash_attn
):
    """The encoder's compute buffer, reserved at load, as llama.cpp reports it, against
    the estimate's model of it; the encoder takes flash attention whatever the text
    model's setting (else 8 heads' scores would add 32 MiB)."""
    from vllmchat.core.models.projector import read_projector

    shape = VisionShape(n_embd=256, n_ff=1024, n_head=8, image_size=448)
    path = write_gemma3_mmproj(tmp_path / "mmproj-wide.gguf", 576, shape)
    settings = LoadSettings(
        model_path=str(demo_model),
        mmproj_path=str(path),
        n_ctx=1024,
        n_threads=2,
        flash_attn=flash_attn,
    )
    client = make_client()
    plain = client.load(settings.with_changes(mmproj_path="")).buffers_mib
    reported = client.load(settings).buffers_mib
    projector = read_projector(path)
    weights = projector.weights_bytes / 2**20
    assert reported["projector model:CPU"] == pytest.approx(weights, abs=0.01)
    compute = reported["projector compute:CPU"] * 2**20
    assert compute == pytest.approx(projector.encode_bytes, rel=0.01)
    own = {k: v for k, v in reported.items() if not k.startswith("projector")}
    assert own == plain  # llama.cpp's own buffers, kept apart
