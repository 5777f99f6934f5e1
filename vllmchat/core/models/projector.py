"""Multimodal projectors (mmproj GGUFs): what one is, which model it fits, what it costs.

A projector is llama.cpp's ``clip`` GGUF: a vision encoder and the projection of its
output into a text model's embedding space. Its header says its type, its input
image size and patch size, how many patches merge into one image token, and
(``clip.vision.projection_dim``, written by llama.cpp's converter) the text model
width it was made for.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.gguf_header import GGUFHeader, read_header

# Projector types whose merge factor defaults to 4 when the header does not say
# (llama.cpp's clip.cpp; Gemma 3 pools 64x64 patches into 16x16 tokens).
_DEFAULT_MERGE = {"gemma3": 4}
_MMPROJ_NAME = re.compile(r"mmproj", re.IGNORECASE)


@dataclass(frozen=True)
class ProjectorInfo:
    """A projector's facts, read from its header."""

    path: str
    projector_type: str
    n_embd_out: int  # the text model width it was made for (0: not written)
    image_size: int
    patch_size: int
    n_merge: int
    n_embd: int  # the vision encoder's width
    n_layer: int
    n_head: int
    n_ff: int
    weights_bytes: int
    longest_edge: int = 0  # tiling projectors: the size images are tiled up to
    projection_bytes: int = 0  # Gemma 3's input projection matrix (0: F16 assumed)

    @property
    def n_patches(self) -> int:
        side = self.image_size // max(self.patch_size, 1)
        return side * side

    @property
    def image_tokens(self) -> int:
        """Tokens one image takes in the context (one tile; tiling projectors take
        several tiles for a large image)."""
        side = self.image_size // max(self.patch_size, 1) // max(self.n_merge, 1)
        return max(side * side, 1)

    @property
    def encode_bytes(self) -> int:
        """The encoder's compute buffer for one image: the largest of its stages, as
        ggml's allocator reuses memory between them. The engine opens the encoder with
        flash attention where the backend has it (CPU, CUDA, Metal), so no stage holds
        the heads' n x n scores. A row is the encoder's width in F32 for every patch.
        Checked against llama.cpp's own report at load on the CPU (``bench vision
        --buffers``) and on an H200 (CUDA): a 4096-patch SigLIP reserves 121.25 MiB.

        - the patch embedding: the image in F32 and its im2col copy in F16;
        - attention: five rows (the layer's input, its norm, Q, K and V);
        - the feed-forward: three rows and the hidden one (n_ff wide);
        - Gemma 3's projection: its graph copies the projection matrix transposed (in
          the file's type) during the last layer's attention, when one row is free
          below the five. A copy larger than that row goes above them, and the
          hidden row above it (unless n_ff <= 3 n_embd: it fits the three rows freed
          below); one larger than half a row leaves no room there for K's F16 copy,
          which goes above the five.
        """
        n = self.n_patches
        row = 4 * n * self.n_embd
        hidden = 4 * n * self.n_ff
        image = 3 * self.image_size * self.image_size * (4 + 2)
        attention = 5 * row
        feed_forward = 3 * row + hidden
        copy = self.projection_copy_bytes
        projection = 0
        if copy > row:
            projection = 5 * row + copy + (hidden if hidden > 3 * row else 0)
        elif 2 * copy > row:
            projection = 5 * row + row // 2
        return max(image, attention, feed_forward, projection)

    @property
    def projection_copy_bytes(self) -> int:
        """The transposed copy of the input projection that Gemma 3's graph makes: the
        matrix as the file stores it (F16, as projectors ship, when not read)."""
        if self.projector_type != "gemma3":
            return 0
        return self.projection_bytes or 2 * self.n_embd * self.n_embd_out

    @property
    def input_bytes(self) -> int:
        """The image as the encoder's graph takes it in: F32 pixels in a host buffer,
        copied to the device (llama.cpp's ``projector compute:CPU``; measured on an H200:
        9.19 MiB at 896 px, 2.30 at 448, 0.57 at 224)."""
        return 3 * self.image_size * self.image_size * 4

    def fits(self, n_embd_text: int) -> str:
        """'' when the projector is made for a model of this width; else why not."""
        if self.n_embd_out and n_embd_text and self.n_embd_out != n_embd_text:
            return (
                f"The projector {Path(self.path).name} was made for a model with "
                f"n_embd {self.n_embd_out}; this model has n_embd {n_embd_text}."
            )
        return ""


def is_projector(header: GGUFHeader) -> bool:
    """Whether a GGUF is a projector rather than a language model."""
    return header.architecture == "clip" or "clip.projector_type" in header.metadata


def looks_like_projector(filename: str) -> bool:
    """Whether a repository's file name names a projector (``mmproj-*.gguf``)."""
    return filename.lower().endswith(".gguf") and bool(_MMPROJ_NAME.search(Path(filename).name))


def describe_projector(header: GGUFHeader, path: str = "") -> ProjectorInfo:
    """The facts of a projector header (``ValueError`` if it is not a vision projector)."""
    meta = header.metadata
    if not is_projector(header):
        raise ValueError(f"{Path(path).name or 'The file'} is not a projector (mmproj) GGUF.")
    kind = str(meta.get("clip.projector_type") or meta.get("clip.vision.projector_type") or "")
    if not meta.get("clip.has_vision_encoder", bool(kind)) or "clip.vision.image_size" not in meta:
        raise ValueError(f"{Path(path).name or 'The projector'} has no vision encoder.")

    def u(key: str, default: int = 0) -> int:
        value = meta.get(key, default)
        return int(value) if isinstance(value, int | float) else default

    return ProjectorInfo(
        path=path,
        projector_type=kind,
        n_embd_out=u("clip.vision.projection_dim"),
        image_size=u("clip.vision.image_size"),
        patch_size=u("clip.vision.patch_size", 1),
        n_merge=u("clip.vision.projector.scale_factor", _DEFAULT_MERGE.get(kind, 1)),
        n_embd=u("clip.vision.embedding_length"),
        n_layer=u("clip.vision.block_count"),
        n_head=u("clip.vision.attention.head_count", 1),
        n_ff=u("clip.vision.feed_forward_length"),
        weights_bytes=sum(t.n_bytes for t in header.tensors),
        longest_edge=u("clip.vision.preproc_image_size"),
        projection_bytes=next(
            (t.n_bytes for t in header.tensors if t.name == "mm.input_projection.weight"), 0
        ),
    )


def read_projector(path: str | os.PathLike[str]) -> ProjectorInfo:
    """A projector file's facts (``OSError``/``ValueError`` when it cannot be read)."""
    p = str(path)
    stat = os.stat(p)
    return _read(p, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _read(path: str, _mtime: int, _size: int) -> ProjectorInfo:
    return describe_projector(read_header(path), path)


def max_image_side(info: ProjectorInfo | None, default: int) -> int:
    """The longest side an image is scaled down to before the projector sees it:
    ``default``, or the projector's own input when that is larger (tiling ones)."""
    if info is None:
        return default
    return max(default, info.image_size, info.longest_edge)


def matching_projector(model_file: str, files: list[str]) -> str | None:
    """The projector among a repository's ``files`` to download with ``model_file``.

    Repositories ship one ``mmproj-*.gguf`` per precision (f16, bf16, f32, q8_0):
    the one in the model file's folder is taken, f16 first (llama.cpp's own
    repositories' default), then the smallest name.
    """
    folder = os.path.dirname(model_file)
    candidates = [f for f in files if looks_like_projector(f) and f != model_file]
    if not candidates:
        return None
    same = [f for f in candidates if os.path.dirname(f) == folder] or candidates

    def rank(name: str) -> tuple[int, str]:
        low = Path(name).name.lower()
        order = next((i for i, k in enumerate(("f16", "bf16", "q8_0", "f32")) if k in low), 9)
        return order, low

    return min(same, key=rank)


def projector_beside(model_path: str | os.PathLike[str]) -> str | None:
    """A projector in the model file's folder made for a model of its width (what a
    downloaded repository holds beside its quant); None when there is none."""
    model = Path(model_path)
    try:
        header = read_header(model)
        names = sorted(p.name for p in model.parent.iterdir() if looks_like_projector(p.name))
    except (OSError, ValueError):
        return None
    n_embd = header.arch_value("embedding_length", 0)
    for name in names:
        path = model.parent / name
        if path == model:
            continue
        try:
            info = read_projector(path)
        except (OSError, ValueError, KeyError):
            continue
        if not info.fits(int(n_embd or 0)):
            return str(path)
    return None
