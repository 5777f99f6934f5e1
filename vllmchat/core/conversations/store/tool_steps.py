"""The tool steps of a reply in the store: each call the model made on the way to its
answer, in order, with how it ended and what the model was shown.

Their table is the store's migration 6 (``schema.py``). ``ToolStepList`` is their
one owner in the store; every write goes through the store's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from vllmchat.core.conversations.store.records import id_batches
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.tools.events import OutcomeKind, ToolCall, ToolResult


class ToolStepList:
    """The tool steps of every reply in ``store``."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def record(self, message_id: int, results: Sequence[ToolResult]) -> None:
        """Keep a reply's calls and results (replacing any it had: a reply is written once)."""
        rows = [
            (
                message_id,
                n,
                r.call.name,
                json.dumps(dict(r.call.arguments), ensure_ascii=False),
                r.call.call_id,
                r.kind,
                r.text,
                int(r.truncated),
                r.elapsed_s,
            )
            for n, r in enumerate(results)
        ]
        with self.store.transaction():
            self.store.db.execute("DELETE FROM tool_steps WHERE message_id = ?", (message_id,))
            self.store.db.executemany(
                "INSERT INTO tool_steps (message_id, position, name, arguments, call_id, kind,"
                " result, truncated, elapsed_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def of_messages(self, message_ids: Sequence[int]) -> dict[int, list[ToolResult]]:
        """Each message's steps in order (messages without any are left out)."""
        steps: dict[int, list[ToolResult]] = {}
        for part, marks in id_batches(message_ids):
            rows = self.store.db.execute(
                "SELECT message_id, name, arguments, call_id, kind, result, truncated, elapsed_s"
                f" FROM tool_steps WHERE message_id IN ({marks}) ORDER BY message_id, position",
                part,
            ).fetchall()
            for row in rows:
                call = ToolCall(row[1], json.loads(row[2]), row[3])
                result = ToolResult(call, cast(OutcomeKind, row[4]), row[5], bool(row[6]), row[7])
                steps.setdefault(int(row[0]), []).append(result)
        return steps
