"""Write a small multimodal projector (mmproj) GGUF of Gemma 3's shape, and test images.

The projector is a SigLIP-style vision transformer, an average pool and Gemma 3's
input projection, as llama.cpp's ``clip`` loads them (projector type ``gemma3``),
with small dimensions and random weights. Its output width is a text model's
``n_embd``, so it plugs into any model (the demo model: 576). What it "sees" is
noise; its loading, preprocessing, encoding, token count and memory are real.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class VisionShape:
    """Dimensions of the vision tower (image tokens: (image_size/patch/n_merge)**2)."""

    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 128
    image_size: int = 224
    patch_size: int = 14
    n_merge: int = 4  # Gemma 3's pooling kernel: 16x16 patches -> 4x4 = 16 image tokens

    half: bool = False  # weight matrices in F16, as real projector files ship

    @property
    def image_tokens(self) -> int:
        side = self.image_size // self.patch_size // self.n_merge
        return side * side


# Gemma 3's real vision tower (SigLIP-So400m at 896 px: 64x64 patches pooled to 256
# image tokens), F16 weights as its published mmproj files have them.
SIGLIP_SHAPE = VisionShape(
    n_embd=1152, n_layer=27, n_head=16, n_ff=4304, image_size=896, n_merge=4, half=True
)


def write_gemma3_mmproj(
    path: str | Path,
    n_embd_text: int,
    shape: VisionShape | None = None,
    *,
    seed: int = 0,
    declared_width: int | None = None,
) -> Path:
    """Write a ``gemma3`` projector whose image embeddings are ``n_embd_text`` wide.
    ``declared_width``: the width its header claims (``clip.vision.projection_dim``;
    default ``n_embd_text``), to test llama.cpp's own check of the real one."""
    import gguf

    sh = shape or VisionShape()
    out = Path(path)
    w = gguf.GGUFWriter(str(out), "clip")
    w.add_name(f"synthetic-gemma3-mmproj-{sh.n_embd}x{sh.n_layer}")
    w.add_type("mmproj")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if sh.half else gguf.LlamaFileType.ALL_F32)
    w.add_string("clip.projector_type", "gemma3")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.embedding_length", sh.n_embd)
    w.add_uint32("clip.vision.feed_forward_length", sh.n_ff)
    w.add_uint32("clip.vision.block_count", sh.n_layer)
    w.add_uint32("clip.vision.projection_dim", declared_width or n_embd_text)
    w.add_uint32("clip.vision.attention.head_count", sh.n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_uint32("clip.vision.image_size", sh.image_size)
    w.add_uint32("clip.vision.patch_size", sh.patch_size)
    w.add_uint32("clip.vision.projector.scale_factor", sh.n_merge)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    rng = np.random.default_rng(seed)

    def tensor(name: str, *dims: int, fill: float | None = None, scale: float = 0.05) -> None:
        if fill is not None:
            arr = np.full(dims, fill, dtype=np.float32)
        else:
            arr = rng.standard_normal(dims, dtype=np.float32) * np.float32(scale)
        # Real files keep norms, biases and the position embedding (added to F32
        # activations, which ggml's add needs in F32) in F32.
        half = sh.half and len(dims) > 1 and "position_embd" not in name
        w.add_tensor(name, arr.astype(np.float16) if half else arr)

    n_patches = (sh.image_size // sh.patch_size) ** 2
    tensor("v.patch_embd.weight", sh.n_embd, 3, sh.patch_size, sh.patch_size)
    tensor("v.patch_embd.bias", sh.n_embd, fill=0.0)
    tensor("v.position_embd.weight", n_patches, sh.n_embd)
    for i in range(sh.n_layer):
        p = f"v.blk.{i}."
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensor(p + part + ".weight", sh.n_embd, sh.n_embd)
            tensor(p + part + ".bias", sh.n_embd, fill=0.0)
        for norm in ("ln1", "ln2"):
            tensor(p + norm + ".weight", sh.n_embd, fill=1.0)
            tensor(p + norm + ".bias", sh.n_embd, fill=0.0)
        tensor(p + "ffn_up.weight", sh.n_ff, sh.n_embd)
        tensor(p + "ffn_up.bias", sh.n_ff, fill=0.0)
        tensor(p + "ffn_down.weight", sh.n_embd, sh.n_ff)
        tensor(p + "ffn_down.bias", sh.n_embd, fill=0.0)
    tensor("v.post_ln.weight", sh.n_embd, fill=1.0)
    tensor("v.post_ln.bias", sh.n_embd, fill=0.0)
    tensor("mm.soft_emb_norm.weight", sh.n_embd, fill=1.0)
    tensor("mm.input_projection.weight", sh.n_embd, n_embd_text)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def png_bytes(width: int, height: int, *, seed: int = 0) -> bytes:
    """A PNG of random RGB noise (``seed`` picks the picture), written with the stdlib."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )
