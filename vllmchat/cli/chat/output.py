"""What ``vllmchat chat`` prints of the application layer's events: a reply as it
streams, summaries, statistics, and a load's outcome."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, TextIO, cast

from vllmchat.cli.chat import attach as attaching
from vllmchat.cli.chat.tools import show_tool_event
from vllmchat.core.app.events import (
    EngineDied,
    Loaded,
    LoadFailed,
    PlacementFellBack,
    PlacementNeedsConfirmation,
    StorageWarning,
)
from vllmchat.core.conversations.events import (
    PassagesUsed,
    PromptPlanEvent,
    SummaryEvent,
    ThinkingEvent,
    ThoughtFor,
)
from vllmchat.core.engine.events import (
    FIXES,
    DoneEvent,
    ErrorEvent,
    ErrorKind,
    PrefillProgressEvent,
    TokenEvent,
)
from vllmchat.core.tools.events import ApprovalNeeded, ToolCallFinished

# What to do about a failure, said in the terminal's words (the engine's are the window's).
TERMINAL_FIXES = {
    ErrorKind.MISSING_FILE: (
        "Give the model file with --model PATH (`vllmchat models` lists the ones on this "
        "machine; `vllmchat search` and `vllmchat download REPO` fetch one)."
    ),
    ErrorKind.NOT_GGUF: "Give a .gguf model file with --model PATH.",
    ErrorKind.NO_MODEL: "Start the chat with --model PATH.",
    ErrorKind.OOM_LOAD: (
        "The weights do not fit: lower --n-gpu-layers (/ngl N in the chat) or use a smaller quant."
    ),
    ErrorKind.NO_VISION: (
        "Start the chat with the model's projector (--mmproj-path MMPROJ.gguf), "
        "or with a model that sees images."
    ),
}


def terminal_fix(kind: ErrorKind, fix: str) -> str:
    """``fix`` in the terminal's words where it is the kind's general one (a fix more
    precise than the kind's is kept)."""
    return TERMINAL_FIXES.get(kind, fix) if fix == FIXES[kind] else fix


def print_stats(stats: Any, out: Any) -> None:
    out.write(
        f"[{stats.tokens_prefilled} prefilled, {stats.tokens_reused} reused, "
        f"ttft {stats.ttft_s * 1000:.0f} ms, {stats.decode_tokens} tokens at "
        f"{stats.decode_tok_s:.1f} tok/s, {stats.kv_tokens}/{stats.n_ctx} ctx, "
        f"{stats.stop_reason}"
        + (f", drafted {stats.drafted}, accepted {stats.accepted}" if stats.drafted else "")
        + "]\n"
        + (f"[{stats.note}]\n" if stats.note else "")
    )


def loaded(events: Iterator[Any]) -> Loaded | None:
    """The ``Loaded`` of a load, or None (its reason printed)."""
    for event in events:
        if isinstance(event, LoadFailed):
            fix = terminal_fix(event.kind, event.fix)
            print(f"error: {event.message} {fix}".strip(), file=sys.stderr)
            return None
        if isinstance(event, PlacementNeedsConfirmation):
            print(f"{event.message} Repeat the command with ! to load it anyway.")
            return None
        if isinstance(event, PlacementFellBack):
            print(f"note: {event.message}")
        if isinstance(event, Loaded):
            return event
    return None


class ProgressLine:
    """``out`` with a line that is rewritten in place (the prompt's reading); it is
    cleared before anything else is written, so nothing starts on it."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.width = 0  # the characters of the progress line on screen (0: none)

    def progress(self, text: str) -> None:
        self.out.write("\r" + text.ljust(self.width))
        self.width = len(text)
        self.out.flush()

    def clear(self) -> None:
        if self.width:
            self.out.write("\r" + " " * self.width + "\r")
            self.width = 0

    def write(self, text: str) -> None:
        if text:
            self.clear()
            self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def show(events: Iterator[Any], terminal: Any, show_stats: bool, state: dict[str, Any]) -> None:
    """Write a turn's (or a summary's) events as they come."""
    out = ProgressLine(terminal)
    try:
        _show(events, out, show_stats, state)
    finally:
        out.clear()
        out.flush()


def _show(
    events: Iterator[Any], out: ProgressLine, show_stats: bool, state: dict[str, Any]
) -> None:
    started = False
    for event in events:
        if isinstance(event, ApprovalNeeded | ToolCallFinished) and started:
            out.write("\n")  # the model's call ends its line
            started = False
        if show_tool_event(event, cast(TextIO, out), state.get("readline", sys.stdin.readline)):
            started = False  # the model's next step starts a new line
            tools = state.get("tools") if isinstance(event, ApprovalNeeded) else None
            failed = tools.remember(event) if tools is not None else ""
            if failed:
                out.write(f"[allowed for this session only: {failed}]\n")
        elif isinstance(event, SummaryEvent):
            out.write(f"[summary {event.status}: {event.message}]\n")
        elif isinstance(event, PromptPlanEvent) and event.dropped_messages:
            out.write(f"[context: the {event.dropped_messages} oldest messages are left out]\n")
        elif isinstance(event, PrefillProgressEvent):
            out.progress(f"[reading prompt {event.done}/{event.total}]")
        elif isinstance(event, ThinkingEvent) and not state.get("thinking"):
            state["thinking"] = True
            out.write("[thinking…]")
        elif isinstance(event, ThoughtFor):
            state["thinking"] = False
            out.write(f"\r[thought for {event.seconds:.0f} s]\n")
        elif isinstance(event, TokenEvent):
            if not started:
                out.write("ai> ")
                started = True
            out.write(event.text)
        elif isinstance(event, DoneEvent):
            out.write(" [stopped]\n" if event.stop_reason == "stopped" else "\n")
            state["last"] = event.stats
            if show_stats:
                print_stats(event.stats, out)
        elif isinstance(event, ErrorEvent):
            fix = terminal_fix(event.kind, event.fix)
            out.write(f"\nerror: {event.message} {fix}".rstrip() + "\n")
        elif isinstance(event, EngineDied):
            out.write("(/restart brings the engine back; the conversation is kept)\n")
        elif isinstance(event, StorageWarning):
            out.write(f"[disk: {event.message}]\n")
        elif isinstance(event, PassagesUsed):
            attaching.show(event, out)
        out.flush()
