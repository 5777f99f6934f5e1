"""Why a file cannot be attached: one typed error per reason, each a clear message."""

from __future__ import annotations

from typing import Literal

Reason = Literal[
    "missing",
    "unreadable",
    "too_large",
    "not_text",
    "unsupported",
    "scanned_pdf",
    "password",
    "empty",
    "image_needs_vision",
    "no_room",
    "no_model",
]


class AttachmentError(Exception):
    """A file that cannot be attached; ``message`` says why and what to do instead."""

    reason: Reason = "unreadable"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class MissingFile(AttachmentError):
    reason = "missing"


class Unreadable(AttachmentError):
    reason = "unreadable"


class TooLarge(AttachmentError):
    reason = "too_large"


class NotText(AttachmentError):
    """Binary content under a text name (a renamed executable, an archive)."""

    reason = "not_text"


class Unsupported(AttachmentError):
    reason = "unsupported"


class ScannedPdf(AttachmentError):
    """A PDF whose pages are pictures: no text layer to read."""

    reason = "scanned_pdf"


class PasswordProtected(AttachmentError):
    reason = "password"


class EmptyDocument(AttachmentError):
    reason = "empty"


class ImageNeedsVision(AttachmentError):
    reason = "image_needs_vision"


class NoRoom(AttachmentError):
    """The document is over the context, and the context is too small to answer from
    parts of it."""

    reason = "no_room"


class NoModel(AttachmentError):
    reason = "no_model"
