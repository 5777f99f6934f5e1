"""Helpers for driving the engine in tests."""

from __future__ import annotations

import os
import signal

from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event, StatsEvent, TokenEvent
from vllmchat.core.settings import SamplingSettings

SIGNALS = {"segfault": signal.SIGSEGV, "abort": signal.SIGABRT, "kill": signal.SIGKILL}

# Speculation off: in auto mode whether a token is drafted depends on measured timings,
# and a verified batch can flip a near-tie (llama.cpp's kernels are not batch-invariant),
# so comparisons of greedy replies across runs would hang on the machine's load.
# tests/test_speculative.py covers speculation where the kernels agree.
GREEDY = SamplingSettings(temperature=0.0, max_tokens=24, seed=1, speculation="off")


def run_turn(client, messages, sampling: SamplingSettings = GREEDY) -> tuple[str, list[Event]]:
    """Run one turn to its end; returns (reply text, events)."""
    events = list(client.chat(messages, sampling))
    text = "".join(e.text for e in events if isinstance(e, TokenEvent))
    return text, events


def final(events: list[Event]) -> Event:
    return events[-1]


def stats_of(events: list[Event]):
    return next(e.stats for e in events if isinstance(e, StatsEvent))


def done(events: list[Event]) -> DoneEvent:
    last = events[-1]
    assert isinstance(last, DoneEvent), f"turn failed: {last}"
    return last


def error(events: list[Event]) -> ErrorEvent:
    last = events[-1]
    assert isinstance(last, ErrorEvent), f"expected an error, got {last}"
    return last


def crash_engine(client, how: str = "segfault") -> None:
    """End a running engine process with a real signal, as a crash in llama.cpp would:
    ``segfault`` (SIGSEGV), ``abort`` (SIGABRT) or ``kill`` (SIGKILL); returns once it
    has ended. An engine that is not running is left alone."""
    if not client.alive:
        return
    os.kill(client.pid, SIGNALS[how])
    client.process.join(timeout=10)


def terminal_chat(script: str, *options: str, env=None, timeout: float = 120):
    """``vllmchat chat OPTIONS`` in its own process, ``script`` typed on its stdin."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", *options],
        input=script,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
