"""The image encoder's compute buffer as llama.cpp reserves it at load, against the
estimate's model of ggml's allocator (``ProjectorInfo.encode_bytes``).

The figures are llama.cpp's own reports for synthetic Gemma 3 projectors
(``write_gemma3_mmproj``, patch 14, n_merge 4), flash attention on."""

from __future__ import annotations

import pytest

from vllmchat.bench.synthetic.synth_mmproj import VisionShape, write_gemma3_mmproj
from vllmchat.core.models.projector import ProjectorInfo, read_projector

MIB = 2**20


def info(
    n_embd: int,
    n_head: int,
    n_ff: int,
    image_size: int,
    n_layer: int,
    width: int,
    projection_bytes: int = 0,
) -> ProjectorInfo:
    return ProjectorInfo(
        "mmproj.gguf",
        "gemma3",
        width,
        image_size,
        14,
        4,
        n_embd,
        n_layer,
        n_head,
        n_ff,
        0,
        projection_bytes=projection_bytes,
    )


# Measured on an H200 (CUDA build, ``projector compute:CUDA0``), F16 weights, text
# width 2560. At 448 and 224 px the transposed copy of the projection matrix is larger
# than a row and lies above the last layer's five attention rows.
H200 = [
    # n_embd, n_head, n_ff, image_size, n_layer, MiB
    (1152, 16, 4304, 896, 27, 121.25),
    (1152, 16, 4304, 672, 27, 68.20),
    (1152, 16, 4304, 448, 4, 44.94),
    (768, 12, 3072, 896, 27, 84.00),
    (1024, 16, 4096, 224, 4, 14.00),
    (1280, 16, 5120, 896, 27, 140.00),
]


@pytest.mark.parametrize(("n_embd", "n_head", "n_ff", "size", "n_layer", "mib"), H200)
def test_the_estimate_matches_the_h200s_report(n_embd, n_head, n_ff, size, n_layer, mib):
    estimate = info(n_embd, n_head, n_ff, size, n_layer, 2560).encode_bytes / MIB
    assert estimate == pytest.approx(mib, rel=0.01)


# Measured on the CPU build (``projector compute:CPU``; the same allocator, the same
# figures as CUDA for the rows above), 2 layers unless said: each stage and each case
# of the projection's copy.
CPU = [
    # n_embd, n_head, n_ff, image_size, n_layer, width, projection bytes (0: F16), MiB
    (1024, 16, 4096, 224, 2, 576, 0, 10.125),  # copy above the five rows
    (1152, 16, 4304, 448, 2, 2304, 0, 44.375),
    (1152, 16, 4304, 448, 2, 4096, 0, 48.3125),
    (1152, 16, 4304, 448, 6, 2560, 0, 44.9375),
    (1152, 16, 4304, 448, 2, 2560, 4 * 1152 * 2560, 50.5625),  # an F32 matrix
    (1152, 16, 4304, 224, 2, 2560, 0, 15.4531),
    (1152, 16, 4304, 336, 2, 2560, 0, 27.7383),
    (128, 4, 512, 224, 2, 2560, 0, 1.75),
    (1152, 16, 2304, 448, 2, 2560, 0, 28.125),  # the hidden row fits below
    (1152, 16, 2304, 448, 2, 1536, 0, 24.75),  # K's F16 copy above the five rows
    (1152, 16, 4304, 448, 2, 2048, 0, 30.3125),  # the copy fits the free row
    (1152, 16, 4304, 448, 4, 1024, 0, 30.3125),
    (1152, 16, 4304, 336, 2, 1024, 0, 17.0508),
    (1152, 16, 4304, 896, 2, 5376, 0, 121.25),  # Gemma 3 27B's width
    (768, 12, 3072, 896, 2, 5376, 0, 84.0),
    (256, 8, 1024, 448, 2, 576, 4 * 256 * 576, 7.0),  # the feed-forward
    (64, 4, 128, 224, 2, 576, 4 * 64 * 576, 0.8613),  # the patch embedding
    (64, 4, 128, 448, 2, 576, 0, 3.4453),
]


@pytest.mark.parametrize(
    ("n_embd", "n_head", "n_ff", "size", "n_layer", "width", "projection", "mib"), CPU
)
def test_the_estimate_matches_the_cpus_report(
    n_embd, n_head, n_ff, size, n_layer, width, projection, mib
):
    estimate = info(n_embd, n_head, n_ff, size, n_layer, width, projection).encode_bytes
    assert estimate / MIB == pytest.approx(mib, rel=0.01)


def test_the_projection_matrix_is_read_in_its_own_type(tmp_path):
    shape = VisionShape(n_embd=64, n_ff=128, n_head=4, image_size=224)
    f32 = read_projector(write_gemma3_mmproj(tmp_path / "f32.gguf", 576, shape))
    half = VisionShape(n_embd=64, n_ff=128, n_head=4, image_size=224, half=True)
    f16 = read_projector(write_gemma3_mmproj(tmp_path / "f16.gguf", 576, half))
    assert f32.projection_copy_bytes == 4 * 64 * 576
    assert f16.projection_copy_bytes == 2 * 64 * 576


def test_other_projectors_make_no_copy():
    gemma = info(1152, 16, 4304, 448, 4, 2560)
    other = ProjectorInfo(**{**gemma.__dict__, "projector_type": "idefics3"})
    assert other.projection_copy_bytes == 0
    assert other.encode_bytes < gemma.encode_bytes
