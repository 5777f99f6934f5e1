"""A conversation's title, the same for every front end: the loaded model is asked
after the first reply (the conversation as the prompt's prefix, so its KV cache is
reused), its answer is checked (``turns/titles.py``), and where it is not a title the
first message's words, cut at a word boundary, name the conversation. A title the
user gave is never overwritten, not even one given while the model was answering."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vllmchat.core.conversations.store.store import title_from
from vllmchat.core.conversations.turns.session import ChatSession
from vllmchat.core.conversations.turns.titles import TITLE_PROMPT, clean_title, fallback_title
from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.engine.side_turns import SideTurn
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.thinking import answer_of

TITLE_TOKENS = 16  # a title fits; a reply that needs more was cut, not a title


@dataclass(frozen=True)
class Titled:
    """The conversation's title now; ``by_model``: the model's answer was kept."""

    title: str
    by_model: bool


def title_conversation(session: ChatSession, busy: Callable[[], bool] = lambda: False) -> Titled:
    """Name ``session``'s conversation: the model's title where it is one, else the first
    message's words. A title of the user's stays; ``busy`` (a turn waiting) makes the
    model give way within a token, and the name is left as it was."""
    store, conversation_id = session.store, session.conversation_id
    path = store.path(conversation_id)
    first = next((m for m in path if m.role == "user"), None)
    current = store.conversation(conversation_id).title
    if first is None:
        return Titled(current, False)
    automatic = ("", title_from(first.content), fallback_title(first.content))
    if current not in automatic:
        return Titled(current, False)  # the user's
    prompt, _ = session.plan(path)
    request = [*prompt, {"role": "user", "content": TITLE_PROMPT}]
    sampling = SamplingSettings(
        temperature=0.0, max_tokens=TITLE_TOKENS, repeat_penalty=1.0, thinking=False
    )
    reply, reason = "", "stopped"
    side = SideTurn(session.client)  # beside the API's turns where slots run
    for event in side.chat(request, sampling):
        if busy():
            side.stop()
        if isinstance(event, DoneEvent):
            reply, reason = answer_of(event.text), event.stop_reason
    if reason in ("stopped", "error"):
        return Titled(current, False)
    title = clean_title(reply, first.content) if reason != "max_tokens" else ""
    name = title or fallback_title(first.content) or current
    now = store.conversation(conversation_id).title
    if now not in automatic:
        return Titled(now, False)  # renamed while the model answered
    if name != now:
        store.rename(conversation_id, name)
    return Titled(name, bool(title))
