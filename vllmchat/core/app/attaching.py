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
        doc = extract(Path(path).expanduser())
        plan = session.context_info() if session.client.info is not None else None
        budget = session.prompt_budget() if plan is not None else 0
        att, fit = session.documents.attach(
            doc, prompt_tokens=plan.prompt_tokens if plan else 0, budget=budget
        )
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
    yield AttachmentAdded(session.conversation_id, att.id, att.name, att.kind, fit.mode,
                          att.tokens, fit.share, att.pages, fit.message)  # fmt: skip
