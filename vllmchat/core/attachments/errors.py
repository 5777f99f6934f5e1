"""Why a file cannot be attached: one typed error, its reason named, its message clear."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Literal

Reason = Literal[
    "missing",
    "unreadable",
    "too_large",
    "not_text",  # binary content under a text name (a renamed executable, an archive)
    "unsupported",
    "scanned_pdf",  # a PDF whose pages are pictures: no text layer to read
    "password",
    "empty",
    "image_needs_vision",
    "no_room",  # over the context, and the context too small to answer from parts of it
    "no_model",
]


class AttachmentError(Exception):
    """A file that cannot be attached; ``reason`` names why, ``message`` says why and
    what to do instead."""

    def __init__(self, message: str, reason: Reason = "unreadable") -> None:
        super().__init__(message)
        self.message = message
        self.reason: Reason = reason

    def __reduce__(self) -> tuple[type[AttachmentError], tuple[str, Reason]]:
        return type(self), (self.message, self.reason)


def refusal(reason: Reason) -> Callable[[str], AttachmentError]:
    """The error of one reason, made from its message."""
    return partial(AttachmentError, reason=reason)


# One maker per reason, by the name the readers raise it under.
MissingFile = refusal("missing")
Unreadable = refusal("unreadable")
TooLarge = refusal("too_large")
NotText = refusal("not_text")
Unsupported = refusal("unsupported")
ScannedPdf = refusal("scanned_pdf")
PasswordProtected = refusal("password")
EmptyDocument = refusal("empty")
ImageNeedsVision = refusal("image_needs_vision")
NoRoom = refusal("no_room")
NoModel = refusal("no_model")
