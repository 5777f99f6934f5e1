"""An image file to attach: known by its first bytes (PNG, JPEG, GIF, WebP), read whole
(bounded by the engine's image limit), named by the SHA-256 of its bytes."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.attachments.errors import ImageNeedsVision
from vllmchat.core.attachments.extract import read_bounded, sniff
from vllmchat.core.engine.images import MAX_IMAGE_BYTES


@dataclass(frozen=True)
class ImageFile:
    """An image read from a file."""

    name: str
    mime: str
    data: bytes
    sha256: str
    width: int = 0  # from the header, when it says (0: unknown)
    height: int = 0


def image_kind(path: Path) -> str | None:
    """The image MIME type the file's first bytes say, or None (not an image, or unreadable:
    the document reader then says why)."""
    try:
        with path.open("rb") as f:
            head = f.read(2048)
    except OSError:
        return None
    kind = sniff(head)
    return kind if kind.startswith("image/") else None


def read_image(path: Path, mime: str) -> ImageFile:
    """The image at ``path`` (an ``AttachmentError`` when it cannot be read or is too large)."""
    data = read_bounded(path, MAX_IMAGE_BYTES)
    width, height = _size(data, mime)
    digest = hashlib.sha256(data).hexdigest()
    return ImageFile(path.name or str(path), mime, data, digest, width, height)


def refuse_without_vision(name: str) -> ImageNeedsVision:
    """Why an image cannot be attached to the model loaded."""
    return ImageNeedsVision(
        f"{name} is an image, and the model loaded cannot see images. Pick a model with a "
        "multimodal projector (mmproj) to attach images; nothing was attached."
    )


def _size(data: bytes, mime: str) -> tuple[int, int]:
    """Width and height from the header of a PNG or GIF (others: 0, 0)."""
    try:
        if mime == "image/png" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if mime == "image/gif":
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
    except struct.error:
        pass
    return 0, 0
