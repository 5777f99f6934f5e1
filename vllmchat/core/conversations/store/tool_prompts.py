"""What the model was given of a reply's tool steps, and the tools each conversation offers.

A reply made with tools was written after steps the model saw: each call as it
sampled it, and the messages that carried the results back. They are kept word for
word (with the call's sampled ids), so a later turn puts them back into its prompt
exactly as they were prefilled: the saved KV state still matches, and the model
still sees what the tools returned. Their table, and the picks' column, are the
store's migration 7 (``schema.py``).

A conversation's pick is the names turned off (servers, or tools as the model names
them, ``server_tool``); unset, it is the user's last pick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vllmchat.core.conversations.store.records import id_batches
from vllmchat.core.conversations.store.store import ConversationStore, StoreError


@dataclass(frozen=True)
class StepPrompt:
    """One tool step as the model was given it: its call (with the sampled ids), then the
    messages that carried the results back."""

    messages: tuple[dict[str, str], ...]
    reply_ids: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"messages": [dict(m) for m in self.messages], "reply_ids": list(self.reply_ids)}

    @staticmethod
    def from_json(data: Any) -> StepPrompt:
        """A step read back; raises ``StoreError`` for a malformed one."""
        messages = data.get("messages") if isinstance(data, dict) else None
        ids = data.get("reply_ids", []) if isinstance(data, dict) else None
        if (
            not isinstance(messages, list)
            or not isinstance(ids, list)
            or not all(
                isinstance(m, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in m.items())
                and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)
                for m in messages
            )
            or not all(isinstance(i, int) for i in ids)
        ):
            raise StoreError("A tool step's prompt is malformed.")
        return StepPrompt(tuple(dict(m) for m in messages), tuple(ids))


class ToolPromptList:
    """Every reply's tool steps as prompted, in ``store``."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def record(self, message_id: int, steps: Sequence[StepPrompt]) -> None:
        """Keep a reply's steps (replacing any it had: a reply is written once)."""
        text = json.dumps([s.to_json() for s in steps], ensure_ascii=False)
        with self.store.transaction():
            self.store.db.execute(
                "INSERT OR REPLACE INTO tool_prompts (message_id, messages) VALUES (?, ?)",
                (message_id, text),
            )

    def of_messages(self, message_ids: Iterable[int]) -> dict[int, list[StepPrompt]]:
        """Each reply's steps in order (replies without any are left out)."""
        found: dict[int, list[StepPrompt]] = {}
        for part, marks in id_batches(message_ids):
            rows = self.store.db.execute(
                f"SELECT message_id, messages FROM tool_prompts WHERE message_id IN ({marks})",
                part,
            ).fetchall()
            for message_id, text in rows:
                try:
                    found[int(message_id)] = [StepPrompt.from_json(s) for s in json.loads(text)]
                except (ValueError, StoreError):
                    continue  # a damaged row: the reply is given without its steps
        return found


def _names(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    try:
        names = json.loads(text)
    except ValueError:
        return ()
    return (
        tuple(sorted({n for n in names if isinstance(n, str)})) if isinstance(names, list) else ()
    )


class ToolPickStore:
    """The tools turned off per conversation, and the user's last pick."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def off(self, conversation_id: int) -> tuple[str, ...] | None:
        """The names turned off in a conversation (None: never picked)."""
        row = self.store.db.execute(
            "SELECT tool_pick FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise StoreError(f"There is no conversation {conversation_id}.")
        return _names(row[0])

    def last(self) -> tuple[str, ...]:
        """The names the user last turned off (a new conversation starts so)."""
        row = self.store.db.execute("SELECT off FROM tool_pick_last WHERE id = 1").fetchone()
        return _names(row[0]) or () if row is not None else ()

    def set(self, conversation_id: int, off: Iterable[str], *, last: bool = True) -> None:
        """A conversation's pick (``last``: and the user's last pick)."""
        text = json.dumps(sorted(set(off)), ensure_ascii=False)
        with self.store.transaction():
            changed = self.store.db.execute(
                "UPDATE conversations SET tool_pick = ? WHERE id = ?", (text, conversation_id)
            ).rowcount
            if not changed:
                raise StoreError(f"There is no conversation {conversation_id}.")
            if last:
                self.store.db.execute(
                    "INSERT OR REPLACE INTO tool_pick_last (id, off) VALUES (1, ?)", (text,)
                )
