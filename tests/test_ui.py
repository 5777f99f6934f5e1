"""The desktop app with real widgets, the real engine and the demo model (offscreen)."""

from __future__ import annotations

import os
import signal

import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QPushButton

from vllmchat.core.app.start import open_storage
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.models.hardware import GpuInfo, HardwareInfo

TIMEOUT = 60_000


@pytest.fixture
def window(qtbot, tmp_path, demo_model):
    """The window on an application opened as the desktop app opens it."""
    from vllmchat.ui.window.main_window import MainWindow

    storage = open_storage(file=tmp_path / "c.sqlite3", kv_folder=tmp_path / "kv")
    settings = AppSettings.of(
        model_path=str(demo_model), n_ctx=2048, n_threads=2, max_tokens=48, temperature=0.0
    )
    w = MainWindow(storage.app(settings))
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
        w.start()
    qtbot.waitUntil(lambda: w.desc is not None, timeout=TIMEOUT)
    yield w
    w.close()
    assert not w.bridge.busy, "a call was left on the engine's thread"
    assert not w.workers.busy, "a worker thread was left running"
    assert not w.bridge.snapshot.alive, "the engine process was left running"
    storage.close()


def _send(qtbot, w, text: str) -> object:
    """Type and send; wait until the GUI thread has shown the end of the turn."""
    with qtbot.waitSignal(w.turn_ended, timeout=TIMEOUT) as ended:
        w.input.edit.setPlainText(text)
        w.input._submit()
    assert ended.args[0] is w.last_turn
    return ended.args[0]


def _branch(w) -> list:
    """The open conversation's messages, as the application layer has them stored."""
    return list(w.stored.branch(w.conversation_id))


def _load(qtbot, w, action) -> object:
    with qtbot.waitSignal(w.loads.load_ended, timeout=TIMEOUT):
        action()
    return w.last_load


def test_tokens_stream_into_the_view_and_stop_works(qtbot, window):
    window.bridge.configure(max_tokens=400)
    window.input.edit.setPlainText("Tell me a long story about a lighthouse.")
    window.input._submit()
    qtbot.waitUntil(
        lambda: window.chat.streaming is not None and len(window.chat.streaming.text) > 20,
        timeout=TIMEOUT,
    )
    assert window.input.stop.isEnabled() and not window.input.send.isEnabled()
    with qtbot.waitSignal(window.turn_ended, timeout=TIMEOUT) as ended:
        window.input.stop.click()
    event = ended.args[0]
    assert event.stop_reason == "stopped" and event.stats.decode_tokens < 60
    last = window.chat.messages()[-1]
    assert last.role == "assistant" and last.note.text() == "(stopped)"
    assert _branch(window)[-1].partial


def test_enter_sends_and_shift_enter_breaks_the_line(qtbot, window):
    from PySide6.QtCore import Qt

    edit = window.input.edit
    edit.setFocus()
    qtbot.keyClicks(edit, "line one")
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(edit, "line two")
    assert edit.toPlainText() == "line one\nline two"
    with qtbot.waitSignal(window.turn_ended, timeout=TIMEOUT):
        qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert _branch(window)[0].content == "line one\nline two"


def test_slider_reload_keeps_the_cache_and_the_next_turn_prefills_only_new(qtbot, window):
    # No GPU here: the panel is given a machine description with one (plain data), so
    # the slider is enabled; llama.cpp's CPU build then loads the layers on the CPU.
    _send(qtbot, window, "Name three rivers.")
    _send(qtbot, window, "And three lakes?")
    gpu = HardwareInfo(8 << 30, 8 << 30, [GpuInfo("Test GPU", 8 << 30, 8 << 30, "test")], True)
    window.offload.set_model(window.desc, gpu, window.loads.fit())
    assert window.offload.slider.isEnabled()
    with qtbot.waitSignal(window.loads.load_ended, timeout=TIMEOUT):
        window.offload.slider.setValue(5)  # keyboard-like change: debounced reload
        qtbot.waitUntil(lambda: not window.input.edit.isEnabled(), timeout=5000)
    assert window.last_load.restored and window.settings.load.placement.n_gpu_layers == 5
    assert "VRAM" in window.offload.estimate.text()
    assert window.input.edit.isEnabled()
    done = _send(qtbot, window, "And three seas?")
    assert done.stats.tokens_reused > 50
    assert done.stats.tokens_prefilled == done.stats.tokens_new


def test_no_gpu_disables_the_slider_with_the_reason(qtbot, window):
    assert not window.offload.slider.isEnabled()
    assert "CPU-only" in window.offload.reason.text()


def test_killed_engine_shows_the_banner_and_restart_recovers(qtbot, window):
    _send(qtbot, window, "Hello!")
    before = [m.content for m in _branch(window)]
    os.kill(window.bridge.snapshot.pid, signal.SIGKILL)
    qtbot.waitUntil(window.banner.isVisible, timeout=10_000)
    assert "SIGKILL" in window.banner.label.text()
    _load(qtbot, window, window.banner.restart.click)
    assert not window.banner.isVisible()
    assert [m.content for m in _branch(window)] == before
    assert len(window.chat.messages()) == 2
    done = _send(qtbot, window, "Still there?")
    assert done.text is not None and window.bridge.snapshot.alive


def test_conversations_new_search_and_switch(qtbot, window):
    _send(qtbot, window, "Tell me about zebras.")
    first = window.conversation_id
    listed = window.conversations.list
    window.new_conversation()
    assert window.conversation_id is None and window.chat.messages() == []
    assert listed.count() == 1 and listed.currentItem() is None
    window.conversations.search.setText("zebras")
    assert listed.count() == 1
    listed.setCurrentRow(0)
    assert window.conversation_id == first and len(window.chat.messages()) == 2
    assert len(window.stored.list()) == 1


def test_a_new_chat_is_stored_at_its_first_message(qtbot, window):
    """ "New chat" writes nothing; the first message stores the conversation, which the
    list then shows and selects; a new chat left without a word leaves nothing."""
    stored, listed = window.stored, window.conversations
    assert stored.list() == () and window.conversation_id is None  # a first start
    with qtbot.waitSignal(window.bridge.events.new_chat_pending, timeout=TIMEOUT):
        window.new_conversation()
    assert stored.list() == ()
    _send(qtbot, window, "Tell me about otters.")
    [first] = stored.list()
    assert window.conversation_id == first.id
    assert listed.list.count() == 1 and listed.current_id() == first.id
    assert [m.role for m in _branch(window)] == ["user", "assistant"]
    with qtbot.waitSignal(window.bridge.events.new_chat_pending, timeout=TIMEOUT):
        window.new_conversation()
    assert len(stored.list()) == 1 and window.conversation_id is None
    _send(qtbot, window, "And about beavers?")
    assert len(stored.list()) == 2 and window.conversation_id != first.id
    assert _branch(window)[0].content == "And about beavers?"


def test_picker_lists_hub_quants_and_downloads_one(qtbot, hub, small_quants, tmp_path, monkeypatch):
    from vllmchat.core.models.memory import FitSettings
    from vllmchat.ui.models.model_picker import ModelPicker

    monkeypatch.setenv("VLLMCHAT_MODELS_DIR", str(tmp_path / "models"))
    hub.add(
        "test-org/Small-GGUF",
        {"Small-Q8_0.gguf": small_quants["Q8_0"], "Small-Q4_K_M.gguf": small_quants["Q4_K_M"]},
        downloads=7,
    )
    hw = HardwareInfo(16 << 30, 16 << 30, [], False, "CPU-only build")
    picker = ModelPicker(hw, FitSettings(n_ctx=2048))
    qtbot.addWidget(picker)
    picker.show()
    picker.tabs.setCurrentIndex(1)
    picker.hub.query.setText("small")
    picker.hub.search()
    qtbot.waitUntil(lambda: picker.hub.repos.count() == 1, timeout=TIMEOUT)
    picker.hub.repos.setCurrentRow(0)
    qtbot.waitUntil(lambda: picker.hub.quant_table.rowCount() == 2, timeout=TIMEOUT)
    fits = [picker.hub.quant_table.item(r, 2).text() for r in range(2)]
    assert sum("★ recommended" in f for f in fits) == 1 and all("RAM only" in f for f in fits)
    with qtbot.waitSignal(picker.accepted, timeout=TIMEOUT):
        picker.hub.download_selected()
    assert picker.chosen_path and os.path.exists(picker.chosen_path)
    assert picker.hub.bar.value() == 1000
    picker.workers.join()


def test_first_run_picker_offers_the_demo_model_offline(qtbot, hub):
    from vllmchat.core.models.memory import FitSettings
    from vllmchat.ui.models.model_picker import ModelPicker

    picker = ModelPicker(None, FitSettings(), first_run=True)
    qtbot.addWidget(picker)
    # Before any model is loaded the picker still knows this machine's RAM: the demo fits.
    qtbot.waitUntil(lambda: picker.installed.rowCount() > 0, timeout=TIMEOUT)
    names = [picker.installed.item(r, 0).text() for r in range(picker.installed.rowCount())]
    row = names.index("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert "does not fit" not in picker.installed.item(row, 3).text()
    with qtbot.waitSignal(picker.accepted, timeout=TIMEOUT):
        picker.demo.click()
    assert picker.chosen_path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")


def test_bad_model_file_gets_a_message_and_the_window_lives(qtbot, window, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + os.urandom(1000))
    good = window.info.path
    kind = _load(qtbot, window, lambda: window.models.load_model(str(bad))).kind
    assert kind == "corrupt"
    assert "damaged" in window.statusBar().currentMessage()
    assert "damaged" in window.memory.advice.text()
    assert window.isVisible() and window.input.edit.isEnabled()
    _load(qtbot, window, lambda: window.models.load_model(good))
    assert window.info.path == good


def test_first_run_loads_the_instruct_demo_and_it_answers(qtbot, tmp_path, hub):
    """A newcomer's first minute: no model set, the picker's demo, a question, an answer."""
    from vllmchat.core.models.memory import FitSettings
    from vllmchat.ui.models.model_picker import ModelPicker
    from vllmchat.ui.window.main_window import MainWindow

    picker = ModelPicker(None, FitSettings(), first_run=True)
    qtbot.addWidget(picker)
    with qtbot.waitSignal(picker.accepted, timeout=TIMEOUT):
        picker.demo.click()
    storage = open_storage(file=tmp_path / "c.sqlite3", kv_folder=tmp_path / "kv")
    settings = AppSettings.of(temperature=0.0, max_tokens=32)  # otherwise the app's defaults
    assert settings.load.model_path == "" and settings.system_prompt == ""
    w = MainWindow(storage.app(settings))
    qtbot.addWidget(w)
    w.show()
    _load(qtbot, w, lambda: w.models.load_model(picker.chosen_path))
    assert w.info.chat_template and w.info.template_source == "gguf"
    turn = _send(qtbot, w, "What is the capital of France?")
    assert "Paris" in turn.text
    w.close()
    storage.close()


def test_sigterm_closes_like_the_user_would(qtbot, window):
    """A logout or ``kill``: the streaming reply is kept (partial), the KV state saved."""
    from vllmchat.ui.window.app import quit_on_termination

    _send(qtbot, window, "Tell me about zebras, in detail, with many examples.")
    window.bridge.configure(max_tokens=2000)
    tokens = []
    window.bridge.events.token_received.connect(tokens.append)
    timer = quit_on_termination(window)
    try:
        window.input.edit.setPlainText("Now write a very long story about a lighthouse.")
        window.input._submit()
        qtbot.waitUntil(lambda: len(tokens) > 20, timeout=TIMEOUT)
        os.kill(os.getpid(), signal.SIGTERM)
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=TIMEOUT)
    finally:
        timer.stop()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    reply = _branch(window)[-1]
    assert reply.role == "assistant" and reply.partial and reply.content
    assert window.bridge.app.kv.files(window.conversation_id)  # its KV state, written at exit
    assert not window.bridge.snapshot.alive


def test_chat_view_owns_its_widgets(qtbot):
    """The view alone: ids arrive as the store assigns them; edits and failures prune it."""
    from vllmchat.ui.chat.chat_view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.add_message("user", "one", message_id=1)
    view.add_message("assistant", "two", message_id=2).add_regenerate()
    view.add_message("user", "three")
    view.start_reply()
    view.set_message_id(3, "user")
    view.set_message_id(4, "assistant")
    assert [w.message_id for w in view.messages()] == [1, 2, 3, 4]
    assert any(b.text() == "Edit" for b in view.messages()[2].findChildren(QPushButton))
    view.finish_reply("five", partial=False)
    regenerate = [w for w in view.messages() if w.regenerate_button is not None]
    assert regenerate == [view.messages()[-1]]  # only the last reply
    view.start_reply()
    view.discard_reply()
    view.remove_from(4)
    assert [w.message_id for w in view.messages()] == [1, 2, 3] and view.streaming is None
    view.remove_from(2)
    qtbot.waitUntil(lambda: len(view.messages()) == 1)
    assert view.messages()[0].text == "one"
