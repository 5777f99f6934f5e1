"""Tool steps stored with a reply go back into later prompts word for word, and each
conversation offers the tools picked for it (the demo model, a real MCP server, SQLite).

SmolLM2's template has no tool format: its call is grammar-constrained
(``tool_choice="required"``), so the demo model calls a tool on cue.
"""

from __future__ import annotations

from pathlib import Path

from tests.tool_configs import server, write_config
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import EditRefused, Loaded, ToolPickChanged
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import PromptPlanEvent
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.store.tool_prompts import ToolPromptList
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, StatsEvent
from vllmchat.core.tools.events import ToolCallFinished


def _app(tmp_path: Path) -> ChatApp:
    app = ChatApp(ConversationStore(tmp_path / "c.sqlite3"), KVStateCache(tmp_path / "kv"))
    config = write_config(tmp_path, {"demo": server()}, approved=["demo_add"])
    assert app.use_tools(config, tool_choice="required") is None
    app.tools.start_all(timeout_s=60)  # the servers' tools named
    return app


def _load(app: ChatApp, demo_model: Path) -> Loaded:
    settings = AppSettings.of(
        model_path=str(demo_model), n_threads=2, temperature=0.0, n_ctx=2048, max_tokens=32
    )
    loaded = [e for e in app.load(settings) if isinstance(e, Loaded)]
    assert loaded
    return loaded[0]


def test_a_reopened_tool_conversation_prefills_only_the_new_question(
    tmp_path: Path, demo_model: Path
) -> None:
    app = _app(tmp_path)
    try:
        conv = app.store.create().id
        app.open_conversation(conv)
        _load(app, demo_model)
        only_add = app.tool_picks.switch(conv, ["demo"], False)
        assert isinstance(only_add, ToolPickChanged) and only_add.off == ("demo",)
        only_add = app.tool_picks.switch(conv, ["demo_add"], True)
        assert isinstance(only_add, ToolPickChanged) and "demo_add" not in only_add.off
        assert "offered: demo_add" in only_add.message
        events = list(app.send("What is 2 plus 40?"))
        finished = [e.result for e in events if isinstance(e, ToolCallFinished)]
        assert [(r.call.name, r.kind) for r in finished] == [("demo_add", "ok")]
        plan = next(e for e in events if isinstance(e, PromptPlanEvent))
        assert plan.tool_tokens > 20  # the one tool's schema, in the context bar's share
        reply = app.store.path(conv)[-1]
        (step,) = ToolPromptList(app.store).of_messages([reply.id])[reply.id]
        assert step.messages[0]["role"] == "assistant" and "demo_add" in step.messages[0]["content"]
        assert "42" in step.messages[1]["content"] and step.reply_ids
    finally:
        app.shutdown()
        app.tools.close()
        app.store.close()
    again = _app(tmp_path)  # the app started anew on the same store
    try:
        opened = again.open_conversation(conv)
        assert opened.conversation_id == conv
        loaded = _load(again, demo_model)
        assert loaded.restored_tokens > 100
        question = "And 3 plus 4?"
        events = list(again.send(question))
        first_step = next(e.stats for e in events if isinstance(e, StatsEvent))
        new = len(again.engine.tokenize(question))
        # Only the new question (and its template markup) is read; the tool step before
        # the first answer is given as it was prefilled, so the saved state still matches.
        assert first_step.tokens_reused >= loaded.restored_tokens - 1
        assert first_step.tokens_prefilled <= new + 12
        assert isinstance(events[-1], DoneEvent)
        prompt, _ = again.session.plan(again.store.path(conv))  # type: ignore[union-attr]
        assert any(m["content"].startswith("Result of demo_add:") for m in prompt)
    finally:
        again.shutdown()
        again.tools.close()
        again.store.close()


def test_a_pick_refuses_unknown_names_and_a_new_conversation_starts_with_the_last_pick(
    tmp_path: Path,
) -> None:
    app = ChatApp(
        ConversationStore(tmp_path / "c.sqlite3"), KVStateCache(tmp_path / "kv"), engine=_NoEngine()
    )
    try:
        first = app.store.create().id
        refused = app.tool_picks.switch(first, ["demo_add"], False)
        assert isinstance(refused, EditRefused) and "No MCP servers" in refused.message
        assert app.use_tools(write_config(tmp_path, {"demo": server()})) is None
        app.tools.start_all(timeout_s=60)  # the servers' tools named
        refused = app.tool_picks.switch(first, ["nope"], False)
        assert isinstance(refused, EditRefused) and "'nope'" in refused.message
        assert "demo_echo" in refused.message
        changed = app.tool_picks.switch(first, ["echo", "demo_big"], False)  # a tool's own name
        assert isinstance(changed, ToolPickChanged)
        assert changed.off == ("demo_big", "demo_echo")
        second = app.store.create().id
        assert app.tool_picks.pick(second).off == {"demo_big", "demo_echo"}
        app.tool_picks.switch(second, ["demo"], True)
        assert app.tool_picks.pick(second).off == frozenset()
        assert app.tool_picks.pick(first).off == {"demo_big", "demo_echo"}  # its own, kept
    finally:
        app.tools.close()
        app.store.close()


class _NoEngine:
    """No model is needed to change a pick (the store and the servers only)."""

    def close(self) -> None:
        pass
