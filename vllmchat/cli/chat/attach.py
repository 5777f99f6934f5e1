"""``/attach PATH`` and ``--attach PATH`` in ``vllmchat chat``: a document or an image for the next
message, said in one line (or why it was refused)."""

from __future__ import annotations

from typing import Any

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import AttachmentAdded, AttachmentRejected, ConversationCreated
from vllmchat.core.conversations.events import PassagesUsed

HELP = """  /attach PATH    attach a document (text, Markdown, code, PDF, .docx) or an image
                  (a model with a projector) to the next message
  /passages       the passages of the attached documents the last reply was given"""


VISION_HINT = (
    'hint: `vllmchat models` marks the models with a projector beside them "vision"; '
    "start with one: vllmchat chat --model MODEL.gguf --mmproj-path MMPROJ.gguf\n"
)


def attach(app: ChatApp, path: str, out: Any) -> bool:
    """Attach ``path`` for the next message; whether it was taken."""
    path = path.strip().strip("'\"")
    if not path:
        out.write("error: /attach takes a file, e.g. /attach ~/report.pdf\n")
        return False
    taken = False  # a new chat is stored first, the file going with its first message
    for event in app.attaching.attach(path):
        taken = show(event, out) or taken
    return taken


def start_new_chat(app: ChatApp) -> None:
    """A new chat given a fact before its first message is stored now (``/remember``)."""
    pending = app.pending
    if app.session is not None or pending is None:
        return
    made = app.edits.create(system_prompt=pending.system_prompt)
    if isinstance(made, ConversationCreated):
        app.open_conversation(made.conversation_id)


def show(event: Any, out: Any) -> bool:
    """Write an attachment event; True for one attached."""
    if isinstance(event, AttachmentAdded):
        pages = f", {event.pages} pages" if event.pages else ""
        out.write(f"[attached {event.name}{pages}: {event.message}]\n")
        return True
    if isinstance(event, AttachmentRejected):
        out.write(f"error: {event.message}\n")
        if event.reason == "image_needs_vision":
            out.write(VISION_HINT)
    elif isinstance(event, PassagesUsed):
        where = "; ".join(f"{h.name} {h.label}".strip() for h in event.passages)
        out.write(f"[answered from {len(event.passages)} passages: {where}]\n")
    return False


def passages(app: ChatApp, out: Any) -> None:
    """The passages the last reply was given, each with where it is."""
    used = app.attaching.last_passages()
    if not used:
        out.write("the last reply was given no passages\n")
    for n, hit in enumerate(used, 1):
        out.write(f"[{n}] {hit.name}, {hit.label}:\n{hit.text}\n\n")
