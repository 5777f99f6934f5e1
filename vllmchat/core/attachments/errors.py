"""Why a file cannot be attached: one typed error, its reason named, its message clear.

Each reason is a one-line subclass of ``AttachmentError`` (a table, read below), so a
reader raises it by name and a caller tells it apart by ``reason`` alone.
"""

from __future__ import annotations

from typing import Any, Literal

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
    """A file that cannot be attached; ``reason`` names why, ``message`` says why and
    what to do instead."""

    reason: Reason = "unreadable"

    def __init_subclass__(cls, *, reason: Reason, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reason = reason

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# The reasons, by the names the readers raise them under.
class MissingFile(AttachmentError, reason="missing"): ...


class Unreadable(AttachmentError, reason="unreadable"): ...


class TooLarge(AttachmentError, reason="too_large"): ...


class NotText(AttachmentError, reason="not_text"): ...  # binary under a text name


class Unsupported(AttachmentError, reason="unsupported"): ...


class ScannedPdf(AttachmentError, reason="scanned_pdf"): ...  # pages that are pictures


class PasswordProtected(AttachmentError, reason="password"): ...


class EmptyDocument(AttachmentError, reason="empty"): ...


class ImageNeedsVision(AttachmentError, reason="image_needs_vision"): ...


class NoRoom(AttachmentError, reason="no_room"): ...  # over a context too small for parts


class NoModel(AttachmentError, reason="no_model"): ...
