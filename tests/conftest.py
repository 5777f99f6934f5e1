"""Shared fixtures: the real demo and Gemma models, tiny synthetic models, engine clients."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# The Hugging Face mirror listens before huggingface_hub is imported, so the
# real client (in this process and in subprocesses) talks to it through HF_ENDPOINT.
from tests.bundle_build import (  # noqa: F401  (the bundle is built while the suite runs)
    bundle_build,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_unconfigure,
    pytest_xdist_node_collection_finished,
)
from tests.engine_pool import EnginePool, PooledEngineClient
from tests.hf_mirror import Faults, Mirror
from vllmchat.core.settings import usable_cores

# Under pytest-xdist the workers share the cores: each worker's engines, Whisper and
# Piper take its share (``VLLMCHAT_CPUS``), so that no two sets of llama.cpp threads
# spin against each other at their barriers.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "VLLMCHAT_CPUS" not in os.environ:
    os.environ["VLLMCHAT_CPUS"] = str(max(1, usable_cores() // _WORKERS))

MIRROR = Mirror()
os.environ["HF_ENDPOINT"] = MIRROR.url
os.environ.pop("HF_TOKEN", None)
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"


@pytest.fixture(scope="session", autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep tests away from the user's data and settings (the demo model cache is shared)."""
    base = tmp_path_factory.mktemp("vllmchat-home")
    os.environ["VLLMCHAT_DATA_DIR"] = str(base / "data")
    os.environ["VLLMCHAT_CONFIG_DIR"] = str(base / "config")
    os.environ["VLLMCHAT_MODELS_DIR"] = str(base / "models")
    os.environ["VLLMCHAT_KV_DIR"] = str(base / "kv")
    os.environ["VLLMCHAT_MEASUREMENTS_DIR"] = str(base / "measured")
    os.environ["VLLMCHAT_LOG_DIR"] = str(base / "log")


@pytest.fixture(scope="session")
def demo_model() -> Path:
    """The app's demo chat model: SmolLM2-135M-Instruct (llama shape, ChatML in its GGUF)."""
    from vllmchat.core.demo_model import demo_model_path

    return demo_model_path()


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M base: sliding-window layers, no template in its GGUF."""
    from vllmchat.core.demo_model import gemma_model_path

    return gemma_model_path()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny llama (no sliding window) per chat template, each carrying that template."""
    from vllmchat.bench.synthetic.synth import write_llama_gguf
    from vllmchat.core.chat_templates import BUILTIN_TEMPLATES

    folder = tmp_path_factory.mktemp("tiny")
    models = {
        name: write_llama_gguf(folder / f"{name}.gguf", chat_template=tpl)
        for name, tpl in BUILTIN_TEMPLATES.items()
    }
    models["none"] = write_llama_gguf(folder / "none.gguf")
    return models


def _engine_children() -> list[multiprocessing.Process]:
    return [p for p in multiprocessing.active_children() if p.name == "vllmchat-engine"]


def _running_workers() -> list[str]:
    """The window's workers whose work has not ended (none if the window was not used)."""
    workers = sys.modules.get("vllmchat.ui.common.workers")
    return [w.name for w in workers.Worker.running_workers()] if workers else []


@pytest.fixture(scope="session")
def engine_pool() -> Iterator[EnginePool]:
    """Engine processes handed from test to test with no model in them (``engine_pool``)."""
    pool = EnginePool()
    yield pool
    pool.close()


@pytest.fixture(autouse=True)
def _no_leaks(engine_pool: EnginePool) -> Iterator[None]:
    """Fail a test that leaves an engine process, an extra thread or a worker running
    (the pool's processes wait with no model, closed by their clients)."""
    threads_before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pooled = engine_pool.pids()
        procs = [p for p in _engine_children() if p.pid not in pooled]
        threads = [
            t
            for t in threading.enumerate()
            if t not in threads_before and t.is_alive() and not t.daemon
        ]
        workers = _running_workers()
        if not procs and not threads and not workers:
            return
        time.sleep(0.05)
    for p in procs:
        p.kill()
    assert not procs, f"test left engine processes running: {procs}"
    assert not threads, f"test left threads running: {threads}"
    assert not workers, f"test left workers running: {workers}"


@pytest.fixture
def make_client(engine_pool: EnginePool) -> Iterator:
    """Factory of engine clients (their processes from the pool); all are closed at the
    end of the test."""
    from vllmchat.core.engine.local.client import EngineClient

    clients: list[EngineClient] = []

    def make() -> EngineClient:
        client = PooledEngineClient(engine_pool)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def gemma_client(make_client, gemma_model: Path):
    """An engine with Gemma 3 270M loaded (n_ctx 2048)."""
    from vllmchat.core.settings import LoadSettings

    client = make_client()
    client.load(LoadSettings(model_path=str(gemma_model), n_ctx=2048, n_threads=2))
    return client


@pytest.fixture(scope="session")
def _mirror_running() -> Iterator[Mirror]:
    MIRROR.start()
    yield MIRROR
    MIRROR.close()


@pytest.fixture
def hub(_mirror_running: Mirror) -> Iterator[Mirror]:
    """The loopback hub mirror, with no repositories and no faults."""
    MIRROR.repos.clear()
    MIRROR.faults = Faults()
    MIRROR.log.clear()
    yield MIRROR
    MIRROR.repos.clear()
    MIRROR.faults = Faults()


@pytest.fixture(scope="session")
def small_quants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small llama-shaped model really quantized to Q8_0 and Q4_K_M (plus its F16)."""
    import llama_cpp

    from vllmchat.bench.synthetic.synth import write_llama_gguf

    folder = tmp_path_factory.mktemp("quants")
    f16 = write_llama_gguf(folder / "Small-F16.gguf", "small", dtype="f16")
    out = {"F16": f16}
    for label, ftype in (("Q8_0", 7), ("Q4_K_M", 15)):
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        dst = folder / f"Small-{label}.gguf"
        rc = llama_cpp.llama_model_quantize(str(f16).encode(), str(dst).encode(), params)
        assert rc == 0
        out[label] = dst
    return out


@pytest.fixture
def make_demo_app(tmp_path: Path, demo_model: Path, engine_pool: EnginePool) -> Iterator:
    """``make(**settings) -> (ChatApp, Loaded events)``: the demo model loaded (greedy, 2
    threads) with one open conversation; shut down and closed at the end of the test."""
    from vllmchat.core.app.chat_app import ChatApp
    from vllmchat.core.app.events import Loaded
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.store.store import ConversationStore
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache

    made: list = []

    def make(**settings: object) -> tuple:
        store = ConversationStore(tmp_path / "c.sqlite3")
        chat = ChatApp(store, KVStateCache(tmp_path / "kv"), engine=PooledEngineClient(engine_pool))
        made.append((chat, store))
        chat.open_conversation(store.create().id)
        flat = {"model_path": str(demo_model), "n_threads": 2, "temperature": 0.0, **settings}
        loaded = [e for e in chat.load(AppSettings.of(**flat)) if isinstance(e, Loaded)]
        return chat, loaded

    yield make
    for chat, store in made:
        chat.shutdown()
        store.close()


@pytest.fixture
def demo_window(qtbot, tmp_path: Path, demo_model: Path, engine_pool: EnginePool) -> Iterator:
    """``(MainWindow, store, settings)``: the window shown with the demo model loaded
    (greedy, 24 tokens a reply); closed at the end of the test."""
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.conversations.store.store import ConversationStore
    from vllmchat.core.conversations.turns.kv_cache import KVStateCache
    from vllmchat.ui.window.main_window import MainWindow

    store = ConversationStore(tmp_path / "c.sqlite3")
    settings = AppSettings.of(
        model_path=str(demo_model), n_ctx=2048, n_threads=2, max_tokens=24, temperature=0.0
    )
    engine = PooledEngineClient(engine_pool)
    w = MainWindow(
        store, settings, KVStateCache(tmp_path / "kv"), save_settings=False, engine=engine
    )
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.loads.load_ended, timeout=60_000):
        w.start()
    qtbot.waitUntil(lambda: w.desc is not None, timeout=60_000)
    yield w, store, settings
    w.close()
    store.close()


@pytest.fixture
def manager() -> Iterator:
    """A tool server manager with the demo MCP server (``tests/mcp_servers``) started."""
    from vllmchat.core.tools.config import ServerConfig, ToolsConfig
    from vllmchat.core.tools.manager import ToolServerManager

    server = str(Path(__file__).parent / "mcp_servers" / "tool_server.py")
    config = ToolsConfig((ServerConfig("demo", command=sys.executable, args=(server, "stdio")),))
    with ToolServerManager(config) as m:
        assert m.start("demo").result(60).state == "ready"
        yield m


@pytest.fixture(scope="module")
def served(demo_model: Path, engine_pool: EnginePool) -> Iterator[object]:
    """``vllmchat serve`` on the demo model for one test module (``tests/api_server.py``);
    a module that needs another server defines its own ``served``."""
    from tests.api_server import serving

    with serving(demo_model) as server:
        engine_pool.keep(server.pid)
        yield server
