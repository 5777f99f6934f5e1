"""The engine process dying, bad model files: clear errors, the caller never dies."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.helpers import crash_engine, done, error, run_turn
from vllmchat.core.engine.events import EngineError, ErrorKind, TokenEvent
from vllmchat.core.settings import LoadSettings, SamplingSettings


def test_sigkill_mid_stream_becomes_an_error_and_restart_recovers(gemma_client):
    conversation = [{"role": "user", "content": "Write a long poem about the sea."}]
    events = []
    for event in gemma_client.chat(conversation, SamplingSettings(max_tokens=300, ignore_eos=True)):
        events.append(event)
        if len(events) == 3:
            os.kill(gemma_client.pid, signal.SIGKILL)
    err = error(events)
    assert err.kind == ErrorKind.ENGINE_DIED
    assert "SIGKILL" in err.message
    assert err.partial_text == "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert not gemma_client.alive
    # A request while dead is an error, not a hang or a crash.
    _, events = run_turn(gemma_client, conversation)
    assert error(events).kind == ErrorKind.ENGINE_DIED
    gemma_client.restart()
    conversation += [
        {"role": "assistant", "content": err.partial_text},
        {"role": "user", "content": "Shorter, please."},
    ]
    _, events = run_turn(gemma_client, conversation)
    done(events)


@pytest.mark.parametrize(("how", "words"), [("segfault", "segmentation"), ("abort", "abort")])
def test_crash_and_abort_are_reported(gemma_client, how, words):
    crash_engine(gemma_client, how)
    with pytest.raises(EngineError) as info:
        gemma_client.kv()
    assert info.value.kind == ErrorKind.ENGINE_DIED
    assert words in info.value.message
    gemma_client.restart()
    assert gemma_client.kv().kv_tokens == 0


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


def _address_space(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize"))


def test_out_of_memory_for_weights_and_for_kv_are_told_apart(make_client, gemma_model):
    """A real allocation failure: the engine's address space is capped (RLIMIT_AS)."""
    from vllmchat.core.engine.local.client import EngineClient

    probe = make_client()
    probe.start()
    with pytest.raises(EngineError):
        probe.kv()  # no model yet: answers, so the process is up
    base = _address_space(probe.pid)
    probe.close()
    cases = [
        (100, dict(use_mmap=False, n_ctx=512), ErrorKind.OOM_LOAD, "weights"),
        (420, dict(use_mmap=True, n_ctx=2048), ErrorKind.OOM_GENERATE, "KV cache"),
    ]
    for extra_mib, settings, kind, words in cases:
        client = EngineClient(memory_limit=base + (extra_mib << 20))
        try:
            with pytest.raises(EngineError) as info:
                client.load(LoadSettings(model_path=str(gemma_model), **settings))
            assert info.value.kind == kind and words in info.value.message
            assert client.alive, "an allocation failure is an error, not a crash"
        finally:
            client.close()


def test_unsupported_architecture_is_named(make_client, tmp_path):
    import gguf
    import numpy as np

    path = tmp_path / "alien.gguf"
    w = gguf.GGUFWriter(str(path), "alienformer")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    client = make_client()
    with pytest.raises(EngineError) as info:
        client.load(LoadSettings(model_path=str(path), n_ctx=256))
    assert info.value.kind == ErrorKind.UNSUPPORTED_ARCH
    assert "alienformer" in info.value.message
