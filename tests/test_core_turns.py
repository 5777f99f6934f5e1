"""A core of the engine's lent between two tokens (real engine, demo model), and the
voice making each clause within a borrowed turn (real voice)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from vllmchat.core.engine.core_turns import CoreTurns
from vllmchat.core.engine.events import DoneEvent, TokenEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.voice.speaker import Speaker

ASK = [{"role": "user", "content": "Tell me about the sea."}]
LONG = SamplingSettings(temperature=0.0, max_tokens=240, ignore_eos=True, speculation="off")
LENT_S = 0.5


def _decode_lending(client: Any) -> tuple[list[float], dict[str, Any], DoneEvent]:
    """A long reply; after its 20th token another thread borrows the cores for LENT_S."""
    arrivals: list[float] = []
    lent: dict[str, Any] = {}

    def borrow() -> None:
        with client.lend_cores() as given:
            lent.update(given=given, start=time.perf_counter())
            time.sleep(LENT_S)
            lent["end"] = time.perf_counter()

    done = None
    for event in client.chat(ASK, LONG):
        if isinstance(event, TokenEvent):
            arrivals.append(time.perf_counter())
            if len(arrivals) == 20:
                threading.Thread(target=borrow).start()
        elif isinstance(event, DoneEvent):
            done = event
    assert done is not None
    return arrivals, lent, done


def test_a_decode_on_every_core_lends_one_between_two_tokens(
    make_client, demo_model, monkeypatch
) -> None:
    monkeypatch.setenv("VLLMCHAT_CPUS", str(os.cpu_count() or 1))  # every core, as a user has
    client = make_client()
    cores = os.cpu_count() or 1
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=1024, n_threads=cores))
    with client.lend_cores() as given:
        assert given is False  # nothing decodes: nothing to wait for
    arrivals, lent, done = _decode_lending(client)
    assert lent["given"] is True
    during = [t for t in arrivals if lent["start"] < t < lent["end"]]
    if cores > 1:
        assert len(during) > 5  # the decode went on, on one thread fewer
    assert any(t > lent["end"] for t in arrivals)  # and after the core came back
    assert done.stats.decode_tokens == 240


def test_a_decode_on_one_thread_waits_while_its_core_is_borrowed() -> None:
    turns = CoreTurns(multiprocessing.get_context("spawn"))
    turns.lend_when(
        LoadSettings(model_path="m.gguf", n_threads=os.cpu_count() or 1), offloaded=False
    )
    tokens: list[float] = []
    ended = threading.Event()

    def decode() -> None:  # a token every 5 ms, giving way between two
        while not ended.is_set():
            tokens.append(time.perf_counter())
            turns.give_way()
            time.sleep(0.005)

    with turns.decoding():
        decoder = threading.Thread(target=decode)
        decoder.start()
        time.sleep(0.05)
        with turns.borrowed() as given:
            start = time.perf_counter()
            time.sleep(LENT_S)
            end = time.perf_counter()
        time.sleep(0.05)
        ended.set()
        decoder.join()
    assert given is True
    assert [t for t in tokens if start < t < end] == []  # it waited
    assert any(t > end for t in tokens)  # and went on


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a core to spare")
def test_a_decode_that_leaves_a_core_to_spare_lends_nothing(
    make_client, demo_model, monkeypatch
) -> None:
    monkeypatch.setenv("VLLMCHAT_CPUS", str(os.cpu_count() or 1))
    client = make_client()
    threads = (os.cpu_count() or 2) - 1
    client.load(LoadSettings(model_path=str(demo_model), n_ctx=1024, n_threads=threads))
    arrivals, lent, _ = _decode_lending(client)
    assert lent["given"] is False
    during = [t for t in arrivals if lent["start"] < t < lent["end"]]
    assert len(during) > 5  # the decode went on beside the borrower


def test_each_clause_is_made_within_a_turn_and_handed_on_outside_it() -> None:
    speaker = Speaker(threads=1)
    log: list[str] = []

    @contextmanager
    def cores() -> Iterator[bool]:
        log.append("borrow")
        yield True
        log.append("give back")

    sentence = "The sea is wide and deep, and its waves, which never rest, shape every shore."
    speech = speaker.speak(
        sentence, cores=cores, on_clause=lambda piece: log.append(f"clause {piece.text!r}")
    )
    clauses = [entry for entry in log if entry.startswith("clause")]
    assert len(clauses) >= 2 and speech.pcm
    # each clause made within a turn of its own, and handed on after the turn ended
    assert log[::3] == ["borrow"] * len(clauses)
    assert log[1::3] == ["give back"] * len(clauses)
    assert log[2::3] == clauses
