"""The window's Server panel on the demo model: the network refused without a key, a
taken port said in the panel, then a real request through the ``openai`` SDK seen in
the request log, the client's saved state and the engine's queue."""

from __future__ import annotations

import socket
import threading

import openai
from PySide6.QtGui import QGuiApplication

from vllmchat.core.app.serving.api_key import server_key, set_server_key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_panel_serves_the_window_model_and_shows_its_request(
    qtbot, demo_window, tmp_path
) -> None:
    w, _store, _settings = demo_window
    set_server_key("")  # no key: loopback only
    dock = w.server_dock
    panel = dock.panel
    model_menu = next(a for a in w.menuBar().actions() if a.text() == "&Model").menu()
    next(a for a in model_menu.actions() if a.text() == "Server…").trigger()
    assert dock.isVisible()
    qtbot.waitUntil(lambda: panel.switch.isEnabled(), timeout=10_000)  # the key was read
    assert server_key() == "" and panel.key.key == ""

    # The network without a key: refused in the panel, the switch back off.
    panel.lan.setChecked(True)
    panel.switch.setChecked(True)
    assert "set an API key first" in panel.message.text()
    assert not panel.switch.isChecked() and panel.switch.isEnabled()
    assert not dock.control.running
    panel.lan.setChecked(False)

    # A port another program holds.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        panel.port.setValue(taken.getsockname()[1])
        panel.switch.setChecked(True)
        qtbot.waitUntil(lambda: "Choose another port" in panel.message.text(), timeout=10_000)
    assert not panel.switch.isChecked() and not dock.control.running

    # On: one real request, seen in the log, the clients and the queue.
    port = _free_port()
    panel.port.setValue(port)
    with qtbot.waitSignal(dock.control.listening, timeout=10_000):
        panel.switch.setChecked(True)
    assert panel.base_url() == f"http://127.0.0.1:{port}/v1"
    assert not panel.port.isEnabled()
    answers: list[object] = []

    def ask() -> None:
        client = openai.OpenAI(base_url=panel.base_url(), api_key="unused", max_retries=0)
        try:
            answers.append(
                client.chat.completions.create(
                    model="",
                    messages=[{"role": "user", "content": "Name a colour."}],
                    max_tokens=6,
                    user="panel-test",
                )
            )
        except Exception as exc:  # shown by the assertion below
            answers.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    qtbot.waitUntil(lambda: bool(answers), timeout=60_000)
    asking.join()
    reply = answers[0]
    assert not isinstance(reply, Exception), reply
    qtbot.waitUntil(lambda: panel.log.table.rowCount() == 1, timeout=10_000)
    _at, client, what, status, tokens, output, _s = panel.log.rows()[0]
    assert (client, what, status) == ("named-panel-test", "POST /v1/chat/completions", "200")
    assert tokens.endswith(f"/ {reply.usage.prompt_tokens:,}")
    assert output == str(reply.usage.completion_tokens)
    qtbot.waitUntil(lambda: panel.clients.table.rowCount() == 1, timeout=10_000)
    assert panel.clients.table.item(0, 0).text() == "named-panel-test"
    assert panel.clients.table.item(0, 3).text() == "RAM"
    assert "1 client" in panel.clients_summary.text()
    qtbot.waitUntil(lambda: panel.queue.text() == "running: nothing, waiting: 0")

    with qtbot.waitSignal(dock.control.stopped, timeout=10_000):
        panel.switch.setChecked(False)
    assert not dock.control.running and panel.port.isEnabled()
    with socket.socket() as again:  # nothing listens on the port any more
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))

    # The key: made, copied, removed (in the keyring, through a worker).
    panel.key.new_button.click()
    qtbot.waitUntil(lambda: panel.key.key.startswith("vc-"), timeout=10_000)
    assert server_key() == panel.key.key
    panel.key.copy_button.click()
    assert QGuiApplication.clipboard().text() == panel.key.key
    panel.key.remove_button.click()
    qtbot.waitUntil(lambda: panel.key.key == "", timeout=10_000)
    assert server_key() == ""

    # The window closes with the server on: it stops, and the clients' states are kept.
    with qtbot.waitSignal(dock.control.listening, timeout=10_000):
        panel.switch.setChecked(True)
    dock.close_server()  # as the window's close does, before the engine ends
    assert not dock.control.running
    kept = (tmp_path / "kv").glob("*/index.json")  # beside the window's conversations
    assert any("named-panel-test" in index.read_text() for index in kept)
