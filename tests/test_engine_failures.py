"""The engine process dying, bad model files: clear errors, the caller never dies."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.helpers import done, error, run_turn
from vllmchat.core.engine import EngineError, ErrorKind, TokenEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings


def test_sigkill_mid_stream_becomes_an_error_and_restart_recovers(demo_client):
    conversation = [{"role": "user", "content": "Write a long poem about the sea."}]
    events = []
    for event in demo_client.chat(conversation, SamplingSettings(max_tokens=300, ignore_eos=True)):
        events.append(event)
        if len(events) == 3:
            os.kill(demo_client.pid, signal.SIGKILL)
    err = error(events)
    assert err.kind == ErrorKind.ENGINE_DIED
    assert "SIGKILL" in err.message
    assert err.partial_text == "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert not demo_client.alive
    # A request while dead is an error, not a hang or a crash.
    _, events = run_turn(demo_client, conversation)
    assert error(events).kind == ErrorKind.ENGINE_DIED
    demo_client.restart()
    conversation += [
        {"role": "assistant", "content": err.partial_text},
        {"role": "user", "content": "Shorter, please."},
    ]
    _, events = run_turn(demo_client, conversation)
    done(events)


@pytest.mark.parametrize(("how", "words"), [("segfault", "segmentation"), ("abort", "abort")])
def test_crash_and_abort_are_reported(demo_client, how, words):
    demo_client.crash(how)
    with pytest.raises(EngineError) as info:
        demo_client.kv()
    assert info.value.kind == ErrorKind.ENGINE_DIED
    assert words in info.value.message
    demo_client.restart()
    assert demo_client.kv()["kv_tokens"] == 0


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_bad_model_files_get_the_right_error(make_client, tmp_path, tiny_models):
    good = tiny_models["chatml"].read_bytes()
    header_only = good[:200]
    cases = {
        "missing": (str(tmp_path / "nope.gguf"), ErrorKind.MISSING_FILE),
        "empty": (_write(tmp_path / "empty.gguf", b""), ErrorKind.TRUNCATED),
        "random": (_write(tmp_path / "random.gguf", os.urandom(4096)), ErrorKind.NOT_GGUF),
        "text": (_write(tmp_path / "notes.gguf", b"hello world\n" * 50), ErrorKind.NOT_GGUF),
        "cut in header": (_write(tmp_path / "cut.gguf", header_only), ErrorKind.TRUNCATED),
        "cut in data": (
            _write(tmp_path / "half.gguf", good[: len(good) // 2]),
            ErrorKind.TRUNCATED,
        ),
        "garbage after magic": (
            _write(tmp_path / "garbage.gguf", b"GGUF\x03\x00\x00\x00" + os.urandom(8192)),
            ErrorKind.CORRUPT,
        ),
    }
    client = make_client()
    for name, (path, kind) in cases.items():
        with pytest.raises(EngineError) as info:
            client.load(LoadSettings(model_path=path, n_ctx=256))
        assert info.value.kind == kind, name
        assert info.value.fix, name
        assert client.alive, f"the engine process died on {name}"
    client.load(LoadSettings(model_path=str(tiny_models["chatml"]), n_ctx=256))
    done(run_turn(client, [{"role": "user", "content": "hi"}])[1])


def test_garbled_weights_load_without_crashing(make_client, tmp_path, tiny_models):
    """A valid header over garbled tensor data cannot be told from weights: no crash."""
    data = bytearray(tiny_models["chatml"].read_bytes())
    third = len(data) // 3
    data[-third:] = os.urandom(third)  # random weights: still loads
    path = _write(tmp_path / "noisy.gguf", bytes(data))
    client = make_client()
    client.load(LoadSettings(model_path=path, n_ctx=256))
    events = list(client.chat([{"role": "user", "content": "x"}], SamplingSettings(max_tokens=4)))
    assert client.alive and events, "garbled weights give noise, not a crash"
