"""Images in a prompt, as the engine takes them (no llama.cpp here).

A message's text holds ``MEDIA_MARKER`` (llama.cpp's mtmd default marker) where an
image goes; the turn's request carries the images, as bytes or file paths, in the
order their markers appear across the messages. An image is known by the SHA-256
of its bytes: the engine's record of its KV cache names each image position by it,
so a follow-up about an image already in the cache (and, through the saved KV
state, after a restart) encodes no image.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from vllmchat.core.engine.events import EngineError, ErrorKind

MEDIA_MARKER = "<__media__>"  # mtmd_default_marker(); checked against the library in tests
MAX_IMAGE_BYTES = 64 << 20  # a larger file is refused before it crosses the pipe
# An image larger than this on its longer side is scaled down, keeping its ratio,
# before the projector's own preprocessing (which resizes to its input size or
# tiles it): a 48-megapixel photo would otherwise cost seconds and ~600 MB to decode
# and resample. Projectors whose input is larger (tiling ones) keep their size.
MAX_IMAGE_SIDE = 1024

ImageInput = bytes | str | os.PathLike[str]


def count_markers(messages: Sequence[Mapping[str, str]]) -> int:
    """How many images the messages' texts place."""
    return sum(m["content"].count(MEDIA_MARKER) for m in messages)


def image_bytes(item: ImageInput) -> bytes:
    """The image's bytes (read from its file when given a path); a clear error when the
    file cannot be read or is too large."""
    if isinstance(item, bytes | bytearray | memoryview):
        data = bytes(item)
    else:
        path = Path(item)
        try:
            size = path.stat().st_size
            if size > MAX_IMAGE_BYTES:
                raise _too_large(path.name, size)
            data = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise EngineError(
                ErrorKind.BAD_REQUEST, f"The image {path.name} cannot be read ({reason})."
            ) from exc
    if len(data) > MAX_IMAGE_BYTES:
        raise _too_large("the image", len(data))
    if not data:
        raise EngineError(ErrorKind.BAD_REQUEST, "An image is empty (0 bytes).")
    return data


def image_id(data: bytes) -> str:
    """An image's stable id: the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


def check_images(messages: Sequence[Mapping[str, str]], n_images: int, *, vision: bool) -> None:
    """Refuse a turn whose images the engine cannot take, saying why."""
    markers = count_markers(messages)
    if n_images and not vision:
        raise EngineError(
            ErrorKind.NO_VISION,
            "This model cannot see images: it was loaded without a multimodal projector (mmproj).",
        )
    if n_images and markers != n_images:  # with no image, a marker typed is plain text
        raise EngineError(
            ErrorKind.BAD_REQUEST,
            f"The messages place {markers} image(s) ({MEDIA_MARKER}) but {n_images} were sent.",
        )


def _too_large(name: str, size: int) -> EngineError:
    return EngineError(
        ErrorKind.BAD_REQUEST,
        f"{name} is {size / (1 << 20):.0f} MB; images up to {MAX_IMAGE_BYTES >> 20} MB are taken.",
    )
