"""Operations are request types with one handler each, and the client's ``call`` sends
any of them: an operation defined here runs in a real engine process."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from dataclasses import dataclass
from typing import get_type_hints

import pytest

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.engine.process.serving.registry import Context, handles
from vllmchat.core.settings import LoadSettings, SamplingSettings


@dataclass(frozen=True)
class Echo(rq.Request[str]):
    """An operation this test adds: one request type..."""

    text: str


@handles(Echo)
def echo(ctx: Context, r: Echo) -> str:
    """...and its one handler, run in the engine process."""
    loaded = "a model" if ctx.runtime is not None else "no model"
    return f"{r.text} from {os.getpid()} with {loaded}"


@dataclass(frozen=True)
class Unserved(rq.Request[str]):
    """A request type no module in the engine process handles."""


def test_a_new_request_and_its_handler_run_in_the_engine_process():
    client = EngineClient(handler_modules=[__name__])  # the engine process imports this file
    try:
        client.start()
        reply: str = client.call(Echo("hello"))
        assert reply == f"hello from {client.pid} with no model"
        assert client.call(rq.Ping()) == "pong", "the built-in operations are still there"
    finally:
        client.close()


def test_a_request_without_a_handler_is_refused_and_the_engine_goes_on(make_client):
    client = make_client()
    client.start()
    with pytest.raises(EngineError) as refused:
        client.call(Unserved())
    assert refused.value.kind == ErrorKind.BAD_REQUEST
    assert "no handler for Unserved" in refused.value.message
    assert client.call(rq.Ping()) == "pong"


def test_a_request_the_engine_cannot_read_is_refused_not_hung(make_client):
    ghost = types.ModuleType("vllmchat_ghost_requests")  # exists only in this process
    sys.modules[ghost.__name__] = ghost
    try:
        Ghost = dataclass(frozen=True)(types.new_class("Ghost", (rq.Request[str],)))
        Ghost.__module__ = ghost.__name__
        ghost.Ghost = Ghost
        client = make_client()
        client.start()
        with pytest.raises(EngineError) as refused:
            client.call(Ghost())
        assert refused.value.kind == ErrorKind.BAD_REQUEST
        assert "could not read a request" in refused.value.message
        assert client.call(rq.Ping()) == "pong"
    finally:
        del sys.modules[ghost.__name__]


def test_every_request_type_has_one_handler_answering_its_reply_type():
    from vllmchat.core.engine.process.serving import handlers  # noqa: F401  (registers them)
    from vllmchat.core.engine.process.serving.registry import HANDLERS

    kinds = {
        v
        for v in vars(rq).values()
        if isinstance(v, type) and issubclass(v, rq.Request) and v is not rq.Request
    }
    slotted = set(rq.SLOT_LOOP_REQUESTS)
    assert not slotted & set(HANDLERS), "a request the slot loop takes has no handler too"
    kinds -= slotted
    assert kinds <= set(HANDLERS), f"no handler: {kinds - set(HANDLERS)}"
    for kind in kinds:
        declared = rq.reply_type(kind)
        answered = get_type_hints(HANDLERS[kind])["return"]
        assert answered == declared, f"{kind.__name__}: declares {declared}, answers {answered}"
    with pytest.raises(TypeError, match="already has a handler"):
        handles(rq.Ping)(lambda ctx, r: "again")


def test_a_failed_load_leaves_no_model_and_nothing_to_restart(make_client, tmp_path):
    client = make_client()
    with pytest.raises(EngineError) as failed:
        client.load(LoadSettings(model_path=str(tmp_path / "missing.gguf")))
    assert failed.value.kind == ErrorKind.MISSING_FILE
    assert client.info is None
    assert client.restart() is None and client.alive
    assert not hasattr(client, "settings"), "the settings belong to the application layer"


def test_a_streaming_request_is_not_a_call(make_client):
    client = make_client()
    with pytest.raises(TypeError, match="use chat"):
        client.call(rq.Chat([], SamplingSettings()))


def test_the_engine_process_imports_where_there_are_no_rlimits():
    """Windows has no ``resource`` module: the entry point runs uncapped there."""
    code = (
        "import sys, psutil\n"  # psutil's Linux side needs resource; its Windows side does not
        "sys.modules['resource'] = None\n"
        "from vllmchat.core.engine.process.serving import entry, handlers, worker\n"
        "assert entry.resource is None and not entry.cap_address_space(1 << 40)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
