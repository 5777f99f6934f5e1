"""The window on a server: the picker's Servers tab against llama.cpp's own server on
loopback, the switch from the local engine, the panels saying why they do not apply,
a chat turn with the server's cache reuse, and back to the local model."""

from __future__ import annotations

import pytest

from vllmchat.bench.engine.llama_server import LlamaServer, server_binary
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.engine.remote.engine import RemoteEngine

pytestmark = pytest.mark.skipif(server_binary() is None, reason="scripts/setup.sh dev installs it")
TIMEOUT = 60_000


@pytest.fixture(scope="module")
def llama_server(demo_model):
    with LlamaServer(demo_model, n_ctx=2048) as server:
        yield server


def test_the_servers_tab_tests_lists_and_chooses(qtbot, llama_server):
    from vllmchat.ui.models.servers_tab import ServersTab

    tab = ServersTab()
    qtbot.addWidget(tab)
    tab.url.setText("http://127.0.0.1:1")  # nothing listens there
    tab.test.click()
    qtbot.waitUntil(lambda: "Cannot reach" in tab.message.text(), timeout=TIMEOUT)
    tab.url.setText(llama_server.url)
    tab.test.click()
    qtbot.waitUntil(lambda: tab.models.count() == 1, timeout=TIMEOUT)
    assert "1 model(s)" in tab.message.text() and tab.use.isEnabled()
    with qtbot.waitSignal(tab.server_chosen) as chosen:
        tab.use.click()
    assert chosen.args[0] == llama_server.url and chosen.args[1].endswith(".gguf")
    tab.workers.join()


def test_the_window_switches_to_the_server_and_back(qtbot, demo_window, llama_server):
    w, store, _ = demo_window
    local = w.bridge.app.engine
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
        w.models.use_server(llama_server.url, "")
    assert isinstance(w.bridge.app.engine, RemoteEngine) and not local.alive
    assert "set on the server" in w.offload.heading.text()
    assert not w.offload.slider.isEnabled() and not w.offload.tune_button.isEnabled()
    assert "owns" in w.offload.reason.text()
    w.readout.update()
    assert "on the server" in w.memory.vram.text()
    titles: list[object] = []
    w.title_shown.connect(titles.append)
    ended: list[object] = []
    w.turn_ended.connect(ended.append)
    for question in ("What is the capital of France?", "And of Italy?"):
        # The user reads the reply first: a turn sent while the server still writes the
        # title stops it, and the server may give that turn a slot with a cold cache.
        qtbot.waitUntil(lambda: len(titles) == len(ended), timeout=TIMEOUT)
        with qtbot.waitSignal(w.turn_ended, timeout=TIMEOUT):
            w.input.edit.setPlainText(question)
            w.input._submit()
    stats = w.readout.last_stats
    assert stats is not None and stats.tokens_reused > 0, "the server's cache"
    w.tuning.open()
    assert "server" in w.tuning.dialog.eta.text() and not w.tuning.dialog.start_button.isEnabled()
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
        w.models.load_model(w.settings.load.model_path)
    assert isinstance(w.bridge.app.engine, EngineClient) and w.bridge.app.engine.alive
    assert w.offload.tune_button.isEnabled()
    assert [m.role for m in store.path(w.bridge.app.conversation_id)][:4] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
