"""The store's migration 7 (real SQLite): tool steps as prompted, and each conversation's
tool pick, kept through an upgrade and carried by the JSON export."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from vllmchat.core.conversations.store.schema import MIGRATIONS
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.store.tool_prompts import (
    StepPrompt,
    ToolPickStore,
    ToolPromptList,
)
from vllmchat.core.conversations.transfer import export_file, import_file

STEP = StepPrompt(
    (
        {"role": "assistant", "content": '{"name": "w_weather", "arguments": {"city": "Oslo"}}'},
        {"role": "user", "content": "Result of w_weather:\nSnow.\n\nAnswer in plain text."},
    ),
    (5, 6, 7),
)


def _version_6(path: Path) -> None:
    db = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:6], 1):
        db.executescript("BEGIN;" + script + f"PRAGMA user_version={number};COMMIT;")
    db.execute("INSERT INTO conversations (title, created, updated) VALUES ('old', 0, 0)")
    db.commit()
    db.close()


def test_a_version_6_store_gains_prompts_and_picks_and_keeps_its_conversations(
    tmp_path: Path,
) -> None:
    _version_6(tmp_path / "old.sqlite3")
    store = ConversationStore(tmp_path / "old.sqlite3")
    try:
        assert store.version == len(MIGRATIONS) == 8
        (old,) = store.conversations()
        picks = ToolPickStore(store)
        assert picks.off(old.id) is None and picks.last() == ()
        picks.set(old.id, ["w", "x_y", "w"])
        assert picks.off(old.id) == ("w", "x_y") and picks.last() == ("w", "x_y")
        with pytest.raises(StoreError):
            picks.set(999, ["w"])
    finally:
        store.close()


def test_prompts_and_the_pick_are_exported_and_imported(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "c.sqlite3")
    try:
        conv = store.create(title="weather")
        store.add_message(conv.id, "user", "Weather in Oslo?")
        reply = store.add_message(conv.id, "assistant", "It snows.")
        ToolPromptList(store).record(reply.id, [STEP])
        ToolPickStore(store).set(conv.id, ["other"])
        path = export_file(store, conv.id, tmp_path / "c.json")
        copy = import_file(store, path)
        new_reply = store.path(copy.id)[-1]
        assert ToolPromptList(store).of_messages([new_reply.id]) == {new_reply.id: [STEP]}
        assert ToolPickStore(store).off(copy.id) == ("other",)
        data = json.loads(path.read_text())
        data["tool_prompts"][0]["steps"][0]["messages"][0]["content"] = 3
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        before = len(store.conversations())
        with pytest.raises(StoreError, match=r"bad\.json: A tool step's prompt is malformed"):
            import_file(store, bad)
        assert len(store.conversations()) == before  # nothing imported
    finally:
        store.close()
