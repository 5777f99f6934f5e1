"""The same app on an OpenAI-compatible server: llama-cpp-python's own, real, on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.helpers import terminal_chat

pytest.importorskip("llama_cpp.server")

from tests.replies import act_after_tokens
from vllmchat.bench.engine.llama_server import free_port
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.events import Loaded, LoadFailed
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, TokenEvent
from vllmchat.core.engine.remote.engine import RemoteEngine


def _start_server(model: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--n_threads",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start")


def _stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="module")
def server(demo_model) -> Iterator[str]:
    proc, url = _start_server(str(demo_model))
    yield url
    _stop_server(proc)


@pytest.fixture
def remote_app(server, tmp_path) -> Iterator[ChatApp]:
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"), engine=RemoteEngine(server, n_ctx=2048))
    app.open_conversation(store.create().id)
    events = list(app.load(AppSettings.of(temperature=0.0, max_tokens=32)))
    assert isinstance(events[-1], Loaded), events[-1]
    yield app
    app.shutdown()
    store.close()


def test_two_turns_stream_through_the_server_and_are_stored(remote_app):
    first = list(remote_app.send("What is the capital of France?"))
    done = first[-1]
    assert isinstance(done, DoneEvent) and "Paris" in done.text
    assert sum(isinstance(e, TokenEvent) for e in first) > 3
    second = list(remote_app.send("And of Italy?"))
    assert isinstance(second[-1], DoneEvent) and second[-1].text
    path = remote_app.store.path(remote_app.conversation_id)
    assert [m.role for m in path] == ["user", "assistant", "user", "assistant"]
    assert path[1].content == done.text and not path[1].partial
    assert not remote_app.kv.files(remote_app.conversation_id)  # no local KV state


def test_offload_says_why_it_does_not_apply(remote_app):
    loaded = next(e for e in remote_app.load(remote_app.settings) if isinstance(e, Loaded))
    assert loaded.hardware is not None and not loaded.hardware.gpu_offload
    assert "server" in loaded.hardware.offload_reason and loaded.description is None


def test_stop_closes_the_stream_and_keeps_the_partial_reply(remote_app):
    list(remote_app.configure(max_tokens=400))
    story = remote_app.send("Write a very long story about a lighthouse keeper.")
    events = act_after_tokens(story, 5, remote_app.stop)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.stop_reason == "stopped"
    reply = remote_app.store.path(remote_app.conversation_id)[-1]
    assert reply.partial and reply.content == done.text


def test_a_server_that_is_down_is_a_clear_load_failure(tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(
        store,
        KVStateCache(tmp_path / "kv"),
        engine=RemoteEngine(f"http://127.0.0.1:{free_port()}"),
    )
    failed = list(app.load(AppSettings()))[-1]
    assert isinstance(failed, LoadFailed) and failed.kind == ErrorKind.SERVER_UNREACHABLE
    assert "Cannot reach" in failed.message and "server runs" in failed.fix
    store.close()


def test_a_server_killed_mid_reply_keeps_the_partial_reply(demo_model, tmp_path):
    proc, url = _start_server(str(demo_model))
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"), engine=RemoteEngine(url, n_ctx=2048))
    try:
        app.open_conversation(store.create().id)
        list(app.load(AppSettings.of(temperature=0.0, max_tokens=1000)))
        story = app.send("Write a very long story about a lighthouse keeper.")
        events = act_after_tokens(story, 5, lambda: os.kill(proc.pid, signal.SIGKILL))
        failed = events[-1]
        assert isinstance(failed, ErrorEvent) and failed.kind == ErrorKind.SERVER_UNREACHABLE
        reply = store.path(app.conversation_id)[-1]
        assert reply.role == "assistant" and reply.partial and reply.content
        assert len(store.path(app.conversation_id)) == 2  # nothing lost
    finally:
        proc.kill()
        proc.wait(5)
        app.shutdown()
        store.close()


def test_terminal_chat_on_a_server(server, tmp_path):
    env = {**os.environ, "VLLMCHAT_DATA_DIR": str(tmp_path / "data")}
    done = terminal_chat(
        "What is the capital of France?\n/quit\n",
        "--server",
        server,
        "--temperature",
        "0",
        "--max-tokens",
        "24",
        "--stats",
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "remote · server template" in done.stdout and "ai> " in done.stdout
    # The server's greedy reply can change with what it served before (in the whole
    # suite it once answered without "Paris"; alone it names it): assert the topic.
    reply = done.stdout.split("ai> ", 1)[1]
    assert "capital" in reply.lower() and "tok/s" in reply


@pytest.mark.parametrize(
    ("mode", "kind", "words"),
    [
        ("401", ErrorKind.SERVER_AUTH, "API key"),
        ("403", ErrorKind.SERVER_AUTH, "API key"),
        ("404", ErrorKind.SERVER_MODEL, "does not serve"),
        ("500", ErrorKind.SERVER_ERROR, "failed (500)"),
        ("500-text", ErrorKind.SERVER_ERROR, "failed (500)"),
        ("503", ErrorKind.SERVER_ERROR, "failed (503)"),
        ("stall", ErrorKind.SERVER_TIMEOUT, "did not answer in time"),
        ("malformed", ErrorKind.SERVER_ERROR, "malformed"),
        ("cut", ErrorKind.SERVER_UNREACHABLE, "cut the reply off"),
    ],
)
def test_bad_servers_get_clear_messages_and_lose_nothing(mode, kind, words, tmp_path):
    from tests.fake_openai import FakeServer

    store = ConversationStore(tmp_path / "c.sqlite3")
    with FakeServer() as fake:
        app = ChatApp(
            store,
            KVStateCache(tmp_path / "kv"),
            engine=RemoteEngine(fake.url, n_ctx=2048, timeout_s=2),
        )
        app.open_conversation(store.create().id)
        assert isinstance(list(app.load(AppSettings.of(max_tokens=16)))[-1], Loaded)
        fake.mode = mode
        failed = list(app.send("Hello?"))[-1]
        assert isinstance(failed, ErrorEvent) and failed.kind == kind, failed
        assert words in failed.message and failed.fix
        path = store.path(app.conversation_id)
        assert path[0].content == "Hello?"  # the message is kept
        if mode == "cut":  # the words that came are kept, marked partial
            assert path[-1].partial and path[-1].content == "Once upon a time"
        fake.mode = "ok"  # the server is back: the next turn works
        assert isinstance(list(app.send("Again?"))[-1], DoneEvent)
        app.shutdown()
    store.close()


def test_api_keys_stay_out_of_settings_and_plain_http_elsewhere_is_warned(tmp_path, monkeypatch):
    from vllmchat.core.app_settings import save_app_settings
    from vllmchat.core.engine.remote import servers

    url = "http://192.168.1.20:8080"
    warning = servers.store_api_key(url, "sk-secret-123")
    # No keyring backend on this machine: the key lives for the session, and we say so.
    assert warning is None or "session only" in warning
    assert servers.api_key(url) == "sk-secret-123"
    assert "unencrypted" in servers.url_warning(url)
    assert servers.url_warning("http://127.0.0.1:8080") is None
    assert servers.url_warning("https://example.org") is None
    path = tmp_path / "settings.json"
    save_app_settings(AppSettings.of(model_path=url), path)
    assert "sk-secret" not in path.read_text()
    servers.forget_api_key(url)
    assert servers.api_key(url) is None


def test_the_app_switches_from_the_local_engine_to_a_server(server, demo_model, tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    app = ChatApp(store, KVStateCache(tmp_path / "kv"))
    app.open_conversation(store.create().id)
    list(app.load(AppSettings.of(model_path=str(demo_model), n_ctx=1024, max_tokens=8)))
    assert isinstance(list(app.send("Hi!"))[-1], DoneEvent)
    local = app.engine
    app.use_engine(RemoteEngine(server, n_ctx=2048))
    assert not local.alive  # the local engine process was ended
    assert isinstance(list(app.load(app.settings))[-1], Loaded)
    done = list(app.send("And now?"))[-1]
    assert isinstance(done, DoneEvent) and len(store.path(app.conversation_id)) == 4
    app.shutdown()
    store.close()


def test_the_looser_server_answers_a_long_prompt_with_an_empty_stream_and_we_say_why(server):
    """llama-cpp-python's server: 200 and an empty stream for a prompt over its context."""
    engine = RemoteEngine(server, n_ctx=2048)
    engine.load(AppSettings().load)
    events = list(engine.chat([{"role": "user", "content": "word " * 3000}]))
    failed = events[-1]
    assert isinstance(failed, ErrorEvent) and failed.kind == ErrorKind.PROMPT_TOO_LONG
    assert "too long" in failed.message and failed.fix
    engine.close()


def test_a_model_the_server_does_not_list_is_named(server):
    engine = RemoteEngine(server, model="no-such-model", n_ctx=2048)
    with pytest.raises(Exception) as info:
        engine.load(AppSettings().load)
    assert "not no-such-model" in str(info.value)
