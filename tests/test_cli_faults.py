"""The terminal's faults, met as a new user meets them: a bad conversation number, a
pipe closed early, a missing model, the prompt's progress line."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from vllmchat.cli import build_parser
from vllmchat.cli.chat.output import show
from vllmchat.core.engine.events import DoneEvent, PrefillProgressEvent, TokenEvent


def screen(written: str) -> list[str]:
    """The lines a terminal shows for ``written`` (a carriage return goes back to the
    line's start, and what follows overwrites it)."""
    lines: list[str] = []
    for raw in written.split("\n"):
        line: list[str] = []
        column = 0
        for char in raw:
            if char == "\r":
                column = 0
                continue
            if column < len(line):
                line[column] = char
            else:
                line.append(char)
            column += 1
        lines.append("".join(line).rstrip())
    return lines


def test_a_conversation_that_is_not_a_number_is_said_plainly(capsys):
    with pytest.raises(SystemExit) as ended:
        build_parser().parse_args(["chat", "--conversation", "abc"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "invalid literal" not in err and "int()" not in err
    assert "'abc' is not a conversation's number" in err
    assert "vllmchat conversations" in err
    assert build_parser().parse_args(["chat", "--conversation", "7"]).conversation == 7
    assert build_parser().parse_args(["chat", "--conversation", "new"]).conversation is None
    assert build_parser().parse_args(["chat"]).conversation is None


def test_the_reading_line_is_cleared_before_the_reply():
    out = io.StringIO()
    events = [
        PrefillProgressEvent(512, 3492),
        PrefillProgressEvent(3492, 3492),
        TokenEvent("Hello", 1),
        TokenEvent(" there", 2),
        DoneEvent("Hello there", "eos"),
    ]
    show(iter(events), out, False, {})
    assert "[reading prompt 3492/3492]" in out.getvalue()  # shown while it reads
    assert screen(out.getvalue()) == ["ai> Hello there", ""]


def test_a_reading_line_left_by_a_turn_without_a_reply_is_cleared():
    out = io.StringIO()
    show(iter([PrefillProgressEvent(10, 10)]), out, False, {})
    assert screen(out.getvalue()) == [""]


def test_a_listing_piped_into_head_ends_quietly(tmp_path):
    from vllmchat.core.conversations.store.store import ConversationStore

    data = tmp_path / "data"
    data.mkdir()
    store = ConversationStore(data / "conversations.sqlite3")
    for n in range(400):  # more than a pipe's buffer holds
        store.create(title=f"A conversation about the number {n}, long enough to fill a line")
    store.close()
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data)}
    proc = subprocess.run(
        f"{sys.executable} -m vllmchat conversations | head -5",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 5
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


def _conversations(data) -> list:
    from vllmchat.core.conversations.store.store import ConversationStore

    store = ConversationStore(data / "conversations.sqlite3")
    try:
        return store.conversations()
    finally:
        store.close()


def test_a_missing_model_is_said_in_the_terminals_words_and_leaves_no_conversation(tmp_path):
    data = tmp_path / "data"
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data)}
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", "--model", str(tmp_path / "nonexistent.gguf")],
        input="",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Pick the model again" not in proc.stderr  # the window's words
    assert "--model PATH" in proc.stderr and "vllmchat models" in proc.stderr
    assert _conversations(data) == []


def test_a_chat_is_stored_at_its_first_message(demo_model, tmp_path):
    data = tmp_path / "data"
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(data)}
    command = [sys.executable, "-m", "vllmchat", "chat", "--n-ctx", "1024", "--max-tokens", "4"]
    left = subprocess.run(
        command, input="/history\n/quit\n", env=env, capture_output=True, text=True, timeout=120
    )
    assert left.returncode == 0, left.stderr
    assert "a new conversation" in left.stdout
    assert "the conversation starts with your first message" in left.stdout
    assert _conversations(data) == []  # started and left without a word: nothing stored
    said = subprocess.run(
        command, input="Hello\n/quit\n", env=env, capture_output=True, text=True, timeout=120
    )
    assert said.returncode == 0, said.stderr
    assert "ai> " in said.stdout
    [stored] = _conversations(data)
    missing = subprocess.run(
        [*command, "--conversation", str(stored.id + 1)],
        input="",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert f"There is no conversation {stored.id + 1}" in missing.stderr
    assert len(_conversations(data)) == 1


@pytest.mark.parametrize("slots", ["0", "64"])
def test_serve_refuses_a_slot_count_out_of_range_before_loading(slots, capsys):
    args = build_parser().parse_args(["serve", "--parallel", slots])
    assert args.func(args) == 2
    assert f"--parallel must be from 1 to 63, got {slots}" in capsys.readouterr().err
