"""The app killed mid-reply loses nothing committed; a long soak stays within the context."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from vllmchat.core.conversations.events import PromptPlanEvent, SummaryEvent
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.session import ChatSession, SessionConfig
from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings


def test_sigkill_of_the_app_mid_reply_keeps_messages_and_marks_the_partial(tmp_path):
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllmchat",
            "chat",
            "--n-ctx",
            "2048",
            "--temperature",
            "0",
            "--max-tokens",
            "300",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        bufsize=1,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write("Name a colour.\n")
    proc.stdin.flush()
    out = ""
    while out.count("you> ") < 2:
        out += proc.stdout.read(1)
    # A long reply: kill the whole app once some of it has been saved.
    proc.stdin.write("/help\n")
    proc.stdin.flush()
    store_path = tmp_path / "conversations.sqlite3"
    store = ConversationStore(store_path)
    proc.stdin.write("Tell me a very long story about a dragon and a knight.\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msgs = store.all_messages(1)
        if len(msgs) == 4 and msgs[-1].content:
            break
        time.sleep(0.05)
    store.close()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ConversationStore(store_path)
    try:
        assert store.integrity_check() == "ok"
        msgs = store.path(1)
        assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant"]
        assert msgs[0].content == "Name a colour." and not msgs[1].partial and msgs[1].content
        assert msgs[3].partial and msgs[3].content
    finally:
        store.close()


REPLY_TOKENS = 8  # many turns, each cheap
N_CTX = 384
TURNS = 24  # about 34 tokens a turn: the history outgrows the context twice


@pytest.mark.timeout(1200)
def test_a_soak_that_outgrows_the_context_twice_stays_within_it(gemma_model, make_client, tmp_path):
    client = make_client()
    client.load(LoadSettings(model_path=str(gemma_model), n_ctx=N_CTX, n_threads=2))
    store = ConversationStore(tmp_path / "c.sqlite3")
    conv = store.create(system_prompt="You are brief.")
    session = ChatSession(
        store,
        client,
        conv.id,
        SessionConfig(
            # short summaries: each one is a generation that the soak waits for
            policy=ContextPolicy(keep_last_turns=2, summary_max_tokens=64, summary_max_words=40),
            sampling=SamplingSettings(temperature=0.7, max_tokens=REPLY_TOKENS, seed=3),
        ),
    )
    errors, over, summaries = [], 0, 0
    for i in range(TURNS):
        events = list(session.send(f"Turn {i}: tell me one fact about the number {i}."))
        last = events[-1]
        if not isinstance(last, DoneEvent):
            errors.append(last)
        for e in events:
            if isinstance(e, PromptPlanEvent) and e.prompt_tokens > N_CTX - REPLY_TOKENS:
                over += 1
            summaries += isinstance(e, SummaryEvent) and e.status == "done"
    assert errors == [] and over == 0
    assert summaries >= 2
    assert len(store.path(conv.id)) == 2 * TURNS
    assert store.integrity_check() == "ok"
    store.close()
