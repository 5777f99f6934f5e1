"""A reply's tool steps in the store (real SQLite): kept in order, migrated onto an
older store, exported to Markdown and JSON, imported back, bad ones refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from vllmchat.core.conversations.store.schema import MIGRATIONS
from vllmchat.core.conversations.store.store import ConversationStore, StoreError
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.conversations.transfer import export_file, import_file, to_markdown
from vllmchat.core.tools.events import ToolCall, ToolResult

STEPS = [
    ToolResult(ToolCall("w_weather", {"city": "Lisbon"}, "c1"), "ok", "Sunny, 21 °C.", False, 0.25),
    ToolResult(ToolCall("w_weather", {"city": "Porto"}), "denied", "The user said: not now"),
]


@pytest.fixture
def store(tmp_path: Path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def _turn(store: ConversationStore) -> tuple[int, int]:
    conv = store.create()
    store.add_message(conv.id, "user", "Weather in Lisbon and Porto?")
    reply = store.add_message(conv.id, "assistant", "Sunny in Lisbon.")
    ToolStepList(store).record(reply.id, STEPS)
    return conv.id, reply.id


def test_steps_are_kept_in_order_and_go_with_their_message(store) -> None:
    conv_id, reply_id = _turn(store)
    steps = ToolStepList(store)
    assert steps.of_messages([reply_id]) == {reply_id: STEPS}
    steps.record(reply_id, STEPS[:1])  # written again: replaced, not added to
    assert steps.of_messages([reply_id, 999]) == {reply_id: STEPS[:1]}
    store.delete(conv_id)
    assert steps.of_messages([reply_id]) == {}


def test_a_version_5_store_gains_the_table(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:5], 1):
        db.executescript("BEGIN;" + script + f"PRAGMA user_version={number};COMMIT;")
    db.close()
    store = ConversationStore(path)
    try:
        assert store.version == len(MIGRATIONS)
        _, reply_id = _turn(store)
        assert len(ToolStepList(store).of_messages([reply_id])[reply_id]) == 2
    finally:
        store.close()


def test_steps_are_exported_and_imported_back(store, tmp_path: Path) -> None:
    conv_id, _ = _turn(store)
    md = to_markdown(store, conv_id)
    assert '> 🔧 `w_weather({"city": "Lisbon"})` — ok' in md and "> Sunny, 21 °C." in md
    assert md.index("w_weather") < md.index("Sunny in Lisbon.")  # the calls, then the answer
    data = json.loads(export_file(store, conv_id, tmp_path / "c.json").read_text())
    assert [s["kind"] for s in data["tool_steps"]] == ["ok", "denied"]
    back = import_file(store, tmp_path / "c.json")
    reply = store.path(back.id)[-1]
    assert ToolStepList(store).of_messages([reply.id]) == {reply.id: STEPS}

    data["tool_steps"][0]["kind"] = "maybe"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    before = len(store.conversations())
    with pytest.raises(StoreError, match="malformed tool steps"):
        import_file(store, tmp_path / "bad.json")
    assert len(store.conversations()) == before  # nothing half-imported
