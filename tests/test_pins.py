"""Pinned messages on the real demo model: word for word in every prompt, never
summarized, their share of the context shown, an overflow said clearly; the
terminal's /pin and the window's pin action."""

from __future__ import annotations

import sqlite3

import pytest

from tests.helpers import terminal_chat
from vllmchat.core.conversations.events import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.session import ChatSession, SessionConfig
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind
from vllmchat.core.settings import LoadSettings, SamplingSettings

FACT = "Remember this: my dog is called Bruno and my sister is Ingrid Solberg."


@pytest.fixture
def store(tmp_path):
    s = ConversationStore(tmp_path / "c.sqlite3")
    yield s
    s.close()


def _session(
    make_client, demo_model, store, n_ctx: int = 1024, max_tokens: int = 48
) -> ChatSession:
    client = make_client()
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=n_ctx, n_threads=2))
    conv = store.create(system_prompt="You are brief.")
    policy = ContextPolicy(threshold=0.4, keep_last_turns=1, summary_max_words=40)
    return ChatSession(
        store,
        client,
        conv.id,
        SessionConfig(
            policy=policy, sampling=SamplingSettings(temperature=0.0, max_tokens=max_tokens)
        ),
    )


def test_a_pinned_message_outlives_summaries_word_for_word(make_client, demo_model, store):
    session = _session(make_client, demo_model, store, max_tokens=24)  # short turns, many
    events = list(session.send(FACT))
    assert isinstance(events[-1], DoneEvent)
    pinned = store.path(session.conversation_id)[0]
    assert store.set_pinned(pinned.id, True).pinned
    summaries = []
    for i in range(12):
        events = list(session.send(f"Tell me about the topic number {i}: rivers and mountains."))
        assert isinstance(events[-1], DoneEvent), events[-1]
        summaries += [e for e in events if isinstance(e, SummaryEvent) and e.status == "done"]
    assert summaries, "the conversation outgrew the threshold"
    prompt, plan = session.plan(store.path(session.conversation_id))
    assert plan.first_message_id != pinned.id  # it left the verbatim history…
    assert FACT in prompt[0]["content"]  # …and is in the system block, word for word
    assert prompt[0]["content"].index("You are brief.") < prompt[0]["content"].index(FACT)
    assert plan.pinned_tokens > 10 and plan.prompt_tokens <= plan.n_ctx
    assert all(FACT not in s.text for s in summaries)  # never summarized


def test_pins_that_alone_overflow_the_context_are_a_clear_message(make_client, demo_model, store):
    session = _session(make_client, demo_model, store, n_ctx=512)
    list(session.send("Short question?"))
    big = store.add_message(session.conversation_id, "user", "word " * 600)
    store.set_pinned(big.id, True)
    list(session.send("Another one?"))  # the big one is now history, pinned
    events = list(session.send("And now?"))
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.kind == ErrorKind.CONTEXT_FULL
    assert "pinned messages take" in error.message and "Unpin some" in error.fix
    plans = [e for e in events if isinstance(e, PromptPlanEvent)]
    assert plans and plans[-1].pinned_tokens > 500
    assert len(store.path(session.conversation_id)) >= 5  # nothing dropped from the store


def test_an_older_store_gains_the_pin_column(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    from vllmchat.core.conversations.store.schema import MIGRATIONS

    db.executescript("BEGIN;" + MIGRATIONS[0] + "PRAGMA user_version=1;COMMIT;")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('Old', 0, 0)")
    db.execute(
        "INSERT INTO messages(conversation_id, role, content, created) "
        "VALUES (1, 'user', 'hello', 0)"
    )
    db.commit()
    db.close()
    store = ConversationStore(path)
    try:
        (message,) = [store.message(1)]
        assert not message.pinned and store.set_pinned(1, True).pinned
    finally:
        store.close()


def test_the_terminal_pins_by_number(demo_model, tmp_path):
    script = f"{FACT}\n/pin 1\n/history\n/pin 9\n/quit\n"
    proc = terminal_chat(
        script, "--n-ctx", "1024", "--max-tokens", "8", "--temperature", "0", timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "message 1 pinned: word for word in every prompt" in proc.stdout
    assert "  1 📌user: Remember this" in proc.stdout
    assert "there is no message 9" in proc.stdout


def test_the_window_pins_a_message(qtbot, demo_window):
    window, store, _ = demo_window
    with qtbot.waitSignal(window.turn_ended, timeout=60000):
        window.input.edit.setPlainText(FACT)
        window.input._submit()
    user = next(w for w in window.chat.messages() if w.role == "user")
    assert user.pin_button is not None and user.pin_button.isEnabled()
    user.pin_button.click()
    assert store.message(user.message_id).pinned and user.pin_button.text() == "Pinned"
    assert "pinned" in window.statusBar().currentMessage()
    window.render_conversation()  # drawn again from the store: still pinned
    again = next(w for w in window.chat.messages() if w.role == "user")
    assert again.pin_button is not None and again.pin_button.isChecked()
