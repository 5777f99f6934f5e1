"""The ``attach`` intent: a file read, measured and kept for the next user message.

Reading the file and counting its tokens take a moment (a long PDF: seconds), so the
intent is a generator like every other: the window runs it on the engine's thread.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from vllmchat.core.app.events import AttachmentAdded, AttachmentRejected
from vllmchat.core.attachments.errors import AttachmentError
from vllmchat.core.attachments.extract import extract
from vllmchat.core.attachments.image_file import image_kind, read_image, refuse_without_vision
from vllmchat.core.conversations.store.store import StoreError
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.engine.events import EngineError

_log = logging.getLogger(__name__)


def attach_file(
    session: ChatSession | None, path: str | Path
) -> Iterator[AttachmentAdded | AttachmentRejected]:
    """Read ``path`` and keep it for the session's next message: ``AttachmentAdded``
    says whether it goes whole or is answered from passages; ``AttachmentRejected``
    says why not (nothing in the conversation changes then)."""
    name = Path(path).name or str(path)
    if session is None:
        yield AttachmentRejected(name, "no_conversation", "No conversation is open.")
        return
    try:
        mime = image_kind(Path(path).expanduser())
        if mime is not None:
            yield _attach_image(session, Path(path).expanduser(), mime)
            return
        doc = extract(Path(path).expanduser())
        loaded = session.client.info is not None
        budget = session.prompt_budget() if loaded else 0
        used = _prompt_tokens(session) if loaded else 0
        att, fit = session.documents.attach(doc, prompt_tokens=used, budget=budget)
    except AttachmentError as exc:
        _log.info("%s was not attached: %s", name, exc.message)
        yield AttachmentRejected(name, exc.reason, exc.message)
        return
    except EngineError as exc:
        yield AttachmentRejected(name, "engine", f"{name} could not be measured: {exc}")
        return
    except (sqlite3.Error, StoreError, OSError) as exc:
        _log.error("%s could not be stored: %s", name, exc, exc_info=exc)
        yield AttachmentRejected(name, "storage", f"{name} could not be stored: {exc}.")
        return
    yield AttachmentAdded(
        session.conversation_id,
        att.id,
        att.name,
        att.kind,
        fit.mode,
        att.tokens,
        fit.share,
        att.pages,
        fit.message,
    )


def _prompt_tokens(session: ChatSession) -> int:
    """Tokens the conversation so far takes; none for a new one without a system prompt
    (some templates, Gemma's, cannot render a prompt without a message)."""
    cid = session.conversation_id
    if not session.store.path(cid) and not session.store.conversation(cid).system_prompt:
        return 0
    return session.context_info().prompt_tokens


def _attach_image(session: ChatSession, path: Path, mime: str) -> AttachmentAdded:
    """Keep an image for the next message when the model loaded sees images (its
    projector's tokens an image); an ``ImageNeedsVision`` error otherwise."""
    info = session.client.info
    if info is None or not session.client.capabilities.vision:
        raise refuse_without_vision(path.name or str(path))
    image = read_image(path, mime)
    meta = {"width": image.width, "height": image.height} if image.width else {}
    att = session.documents.attachments.add_image(
        session.conversation_id,
        name=image.name,
        sha256=image.sha256,
        mime=mime,
        data=image.data,
        meta=meta,
        tokens=info.image_tokens,
    )
    size = f"{image.width}×{image.height}, " if image.width else ""
    message = f"{image.name} ({size}{info.image_tokens} tokens) goes with your next message."
    return AttachmentAdded(
        session.conversation_id,
        att.id,
        att.name,
        "image",
        "image",
        att.tokens,
        att.tokens / max(info.n_ctx, 1),
        0,
        message,
    )
