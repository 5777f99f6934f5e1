"""The window people expect: long conversations load lazily (search jumps into history
that has no widgets yet), code is highlighted with a Copy link and its language, the
system's light/dark scheme is followed live, titles come from the model, and the window
comes back as it was left."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.conversations.turns.titles import refusal
from vllmchat.ui.chat.chat_view import PAGE, ChatView, HistoryItem
from vllmchat.ui.chat.message_widget import MessageWidget
from vllmchat.ui.common.workers import Worker

TIMEOUT = 60_000
CODE = "Try this:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nThen call `add`.\n"


def _items(n: int) -> list[HistoryItem]:
    return [
        HistoryItem("user" if i % 2 == 0 else "assistant", f"message number {i}", i + 1)
        for i in range(n)
    ]


def test_a_long_conversation_gets_widgets_for_its_newest_page_only(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    view.set_history(_items(5000))
    assert len(view.messages()) == PAGE and view.unloaded == 5000 - PAGE
    assert view.messages()[-1].text == "message number 4999"
    assert f"{5000 - PAGE:,} earlier messages" in view.older.text()
    view.load_older()
    assert len(view.messages()) == 2 * PAGE
    assert view.messages()[0].text == f"message number {5000 - 2 * PAGE}"


def test_scrolling_to_the_top_loads_older_messages(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 400)
    view.show()
    view.set_history(_items(200))
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: 0 < bar.maximum() == bar.value(), timeout=5000)  # at the bottom
    top = view.messages()[0]  # the message at the top when the user scrolls up
    view.verticalScrollBar().setValue(0)
    qtbot.waitUntil(lambda: len(view.messages()) >= 2 * PAGE, timeout=5000)
    qtbot.wait(400)
    assert view.verticalScrollBar().value() > 0, "the view stays on what was on screen"
    assert abs(top.y() - view.verticalScrollBar().value()) < 80


def test_search_jumps_to_a_message_that_was_not_loaded(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    view.set_history(_items(1000))
    found = view.jump_to(11)  # message number 10, far back
    assert found is not None and found.text == "message number 10"
    assert view.unloaded < 1000 - PAGE


def test_code_is_highlighted_with_its_language_and_a_copy_link(qtbot):
    widget = MessageWidget("assistant", CODE)
    qtbot.addWidget(widget)
    html = widget.body.toHtml()
    assert widget.code_blocks == ["def add(a, b):\n    return a + b"]
    assert "python" in widget.body.toPlainText() and "Copy" in widget.body.toPlainText()
    assert html.count("color:#") >= 3, "keywords, names and operators coloured"
    assert "add" in widget.body.toPlainText() and "`" not in widget.body.toPlainText()
    widget._on_link(QUrl("copy:0"))
    assert QGuiApplication.clipboard().text() == widget.code_blocks[0]


def test_tables_render_as_tables(qtbot):
    widget = MessageWidget("assistant", "| a | b |\n|---|---|\n| 1 | 2 |\n")
    qtbot.addWidget(widget)
    assert "<table" in widget.body.toHtml() and "1" in widget.body.toPlainText()


def test_the_view_follows_the_system_scheme_live(qtbot):
    from PySide6.QtGui import QColor, QPalette

    from vllmchat.ui.common.theme import ThemeWatcher

    app = QGuiApplication.instance()
    light = app.palette()

    watcher = ThemeWatcher()
    view = ChatView()
    qtbot.addWidget(view)
    watcher.changed.connect(view.apply_theme)
    view.set_history([HistoryItem("user", "hi", 1), HistoryItem("assistant", CODE, 2)])
    light_code = view.messages()[1].body.toHtml()
    dark = QPalette(light)
    dark.setColor(QPalette.ColorRole.Window, QColor("#202124"))
    try:  # what a desktop switching to dark does where Qt reports no colour scheme
        with qtbot.waitSignal(watcher.changed, timeout=5000):
            app.setPalette(dark)
        assert view.dark and all(w.dark for w in view.messages())
        assert "#1d3352" in view.inner.styleSheet()  # the user's colour, dark
        assert view.messages()[1].body.toHtml() != light_code, "code re-highlighted"
        with qtbot.waitSignal(watcher.changed, timeout=5000):
            app.setPalette(light)
        assert not view.dark and "#e3edfc" in view.inner.styleSheet()
    finally:
        app.setPalette(light)


def test_the_attach_button_s_icon_follows_the_system_scheme_live(qtbot):
    from PySide6.QtGui import QColor, QImage, QPalette

    from vllmchat.ui.chat.chat_input import ChatInput
    from vllmchat.ui.common.icons import icon

    app = QGuiApplication.instance()
    light = app.palette()
    chat_input = ChatInput()
    qtbot.addWidget(chat_input)

    def drawn(dark: bool) -> QImage:
        return icon("attach", dark).pixmap(18, 18).toImage()

    assert chat_input.attach.text() == "" and chat_input.attach.icon().pixmap(
        18, 18
    ).toImage() == drawn(False)
    assert drawn(True) != drawn(False), "a lighter stroke on dark"
    dark = QPalette(light)
    dark.setColor(QPalette.ColorRole.Window, QColor("#202124"))
    try:
        with qtbot.waitSignal(chat_input.theme.changed, timeout=5000):
            app.setPalette(dark)
        assert chat_input.attach.icon().pixmap(18, 18).toImage() == drawn(True)
    finally:
        app.setPalette(light)


def test_the_model_titles_the_conversation_after_its_first_reply(qtbot, demo_window):
    w, store, _ = demo_window
    titles = []
    w.bridge.events.title_made.connect(titles.append)
    w.input.edit.setPlainText("What is the capital of France?")
    w.input._submit()
    qtbot.waitUntil(lambda: bool(titles), timeout=TIMEOUT)
    assert titles[0].title and titles[0].title != "New chat"
    if titles[0].by_model:  # else the first words stay
        assert not refusal(titles[0].title, "What is the capital of France?")
    title = store.conversation(w.conversation_id).title
    assert title == titles[0].title
    # ``titles.append`` runs in the worker's thread; the window's slot is queued to the GUI's.
    qtbot.waitUntil(
        lambda: any(
            title in w.conversations.list.item(i).text()
            for i in range(w.conversations.list.count())
        ),
        timeout=5000,
    )


def test_the_window_comes_back_as_it_was_left(qtbot, demo_window, tmp_path):
    from vllmchat.ui.window.main_window import MainWindow

    w, store, settings = demo_window
    first = w.conversation_id
    second = store.create().id  # as a new chat's first message stores it
    w.conversations.refresh()
    w.open_conversation(second)
    w.resize(760, 540)  # or the window's minimum width, where its panels need more
    width = w.size().width()
    w.split.setSizes([300, 500, 200])
    sizes = w.split.sizes()
    w.window_state.save(w.conversation_id)
    again = MainWindow(store, settings, KVStateCache(tmp_path / "kv2"), save_settings=False)
    qtbot.addWidget(again)
    again.show()
    qtbot.wait(100)
    try:
        assert again.conversation_id == second != first
        assert again.size().width() == width and abs(again.split.sizes()[0] - sizes[0]) <= 4
    finally:
        again.close()


def test_a_download_goes_on_in_the_status_bar_after_the_picker_closes(
    qtbot, hub, small_quants, tmp_path, monkeypatch
):
    from vllmchat.core.models.hardware import HardwareInfo
    from vllmchat.core.models.memory import FitSettings
    from vllmchat.ui.models.downloads import DownloadsPanel
    from vllmchat.ui.models.model_picker import ModelPicker

    monkeypatch.setenv("VLLMCHAT_MODELS_DIR", str(tmp_path / "models"))
    hub.add("test-org/Slow-GGUF", {"Slow-Q8_0.gguf": small_quants["Q8_0"]}, downloads=3)
    hub.faults.bytes_per_s = 2 << 20  # a slow line: the download outlasts the dialog
    panel = DownloadsPanel()
    qtbot.addWidget(panel)
    hw = HardwareInfo(16 << 30, 16 << 30, [], False, "CPU-only build")
    picker = ModelPicker(hw, FitSettings(n_ctx=2048), downloads=panel)
    qtbot.addWidget(picker)
    picker.show()
    picker.tabs.setCurrentIndex(1)
    picker.hub.query.setText("test-org/Slow-GGUF")
    picker.hub.search()
    qtbot.waitUntil(lambda: picker.hub.quant_table.rowCount() == 1, timeout=TIMEOUT)
    picker.hub.download_selected()
    qtbot.waitUntil(lambda: panel.bar.value() > 0, timeout=TIMEOUT)
    picker.reject()  # closed mid-download
    assert panel.isVisible() and panel.active and panel.cancel_button.isVisible()
    with qtbot.waitSignal(panel.finished, timeout=TIMEOUT) as done:
        pass
    assert done.args[0].endswith("Slow-Q8_0.gguf") and panel.load_button.isVisible()
    with qtbot.waitSignal(panel.load_requested) as load:
        panel.load_button.click()
    assert load.args == [done.args[0]]
    panel.workers.join()


def test_a_search_hit_opens_its_conversation_at_a_message_not_yet_loaded(qtbot, tmp_path):
    from vllmchat.ui.window.main_window import MainWindow

    store = ConversationStore(tmp_path / "c.sqlite3")
    long = store.create(title="Long")
    parent = None
    for i in range(300):
        text = "the quokka smiles" if i == 7 else f"ordinary message {i}"
        parent = store.add_message(
            long.id, "user" if i % 2 == 0 else "assistant", text, parent_id=parent
        ).id
    target = store.path(long.id)[7].id
    store.create(title="Newer")  # opened first: the newest
    w = MainWindow(store, AppSettings(), KVStateCache(tmp_path / "kv"), save_settings=False)
    qtbot.addWidget(w)
    w.show()
    w.conversations.search.setText("quokka")
    assert w.conversations.list.count() == 1
    w.conversations.list.setCurrentRow(0)
    assert w.conversation_id == long.id
    shown = {m.message_id: m for m in w.chat.messages()}
    assert target in shown and shown[target].text == "the quokka smiles"
    w.close()
    # the opening's work on the engine's thread ends and its events arrive first
    qtbot.waitUntil(lambda: not Worker.running_workers())
    qtbot.wait(20)
    store.close()
