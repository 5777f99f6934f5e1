"""The fact list's front ends: the window's panel (real widgets offscreen, a real
store) sends intents and redraws from the core's events, from any thread; the
window shows the facts of a real turn; the terminal's /facts, /remember, /fact and
/forget."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

from tests.helpers import terminal_chat
from vllmchat.core.app.start import open_storage
from vllmchat.ui.chat.facts_panel import HINT, YOURS, FactsPanel


@pytest.fixture
def core(tmp_path):
    """The store (to set the scene) and the application layer on it, whose fact list
    is the one ``app.conversations`` tells its listeners about."""
    storage = open_storage(file=tmp_path / "c.sqlite3", kv_folder=tmp_path / "kv")
    app = storage.app()
    yield storage.store, app
    storage.close()


@pytest.fixture
def panel(qtbot, core):
    store, app = core
    facts = app.facts
    conv = store.create().id
    facts.take_from(store.add_message(conv, "user", "We have two kids. Write about Oslo."))
    widget = FactsPanel(app.conversations)
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    widget.show_conversation(conv)
    return widget, facts, conv


def texts(panel: FactsPanel) -> list[str]:
    return [panel.list.item(i).text() for i in range(panel.list.count())]


def test_the_panel_adds_rewords_and_deletes_through_the_core(qtbot, panel):
    widget, facts, conv = panel
    assert texts(widget) == ["We have two kids"] and widget.title() == "Facts kept (1)"
    qtbot.keyClicks(widget.entry, "I'm vegetarian")
    qtbot.keyClick(widget.entry, Qt.Key.Key_Return)
    assert [f.text for f in facts.facts(conv)] == ["We have two kids", "I'm vegetarian"]
    assert texts(widget) == ["We have two kids", "I'm vegetarian"] and widget.entry.text() == ""
    assert widget.list.item(1).toolTip() == YOURS
    widget.list.setCurrentRow(0)
    widget.list.editItem(widget.list.item(0))  # as a double-click or F2 does
    qtbot.waitUntil(lambda: widget.list.findChild(QLineEdit) is not None)
    editor = widget.list.findChild(QLineEdit)
    assert editor.maxLength() == 200 and editor.text() == "We have two kids"
    editor.selectAll()
    qtbot.keyClicks(editor, "We have three kids")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: facts.facts(conv)[0].text == "We have three kids")
    assert facts.facts(conv)[0].edited
    widget.list.setCurrentRow(1)
    qtbot.mouseClick(widget.delete_button, Qt.MouseButton.LeftButton)
    assert [f.text for f in facts.facts(conv)] == ["We have three kids"]
    assert texts(widget) == ["We have three kids"]


def test_refused_input_keeps_what_was_typed_and_says_why(qtbot, panel):
    widget, facts, conv = panel
    qtbot.keyClicks(widget.entry, "We have two  kids")
    widget.add_button.click()
    assert "already in the list" in widget.note.text()
    assert widget.entry.text() == "We have two  kids", "nothing typed is lost"
    widget.list.item(0).setText("   ")  # a reworded fact left empty
    assert "Delete removes one" in widget.note.text()
    assert texts(widget) == ["We have two kids"] and facts.facts(conv)[0].text == texts(widget)[0]
    widget.entry.clear()
    qtbot.keyClicks(widget.entry, "dog: Rex")
    widget.add_button.click()
    assert widget.note.text() == HINT, "the next accepted intent clears the reason"


def test_the_panel_redraws_on_changes_made_elsewhere_and_in_other_threads(qtbot, panel, core):
    widget, facts, conv = panel
    store = core[0]
    assert facts is core[1].facts
    worker = threading.Thread(target=facts.add, args=(conv, "flight: BA 762"))
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: texts(widget) == ["We have two kids", "flight: BA 762"])
    other = store.create().id
    facts.add(other, "another conversation's fact")
    qtbot.wait(20)
    assert texts(widget) == ["We have two kids", "flight: BA 762"], "only its conversation"
    facts.delete(facts.facts(conv)[0].id)  # as the terminal would
    qtbot.waitUntil(lambda: texts(widget) == ["flight: BA 762"])
    widget.show_conversation(other)
    assert texts(widget) == ["another conversation's fact"]


def test_a_closed_panel_stops_listening(qtbot, core):
    store, app = core
    listening = app.conversations._listeners
    before = len(listening)
    widget = FactsPanel(app.conversations)
    widget.show_conversation(store.create().id)
    assert len(listening) == before + 1
    widget.deleteLater()
    qtbot.waitUntil(lambda: len(listening) == before)


def test_the_window_shows_the_facts_of_a_turn(qtbot, demo_window):
    window, _, _ = demo_window
    panel = window.facts_panel
    qtbot.waitUntil(lambda: panel.conversation_id == window.conversation_id)
    with qtbot.waitSignal(window.turn_ended, timeout=60000):
        window.input.edit.setPlainText("I'm vegetarian. Now write one line about Oslo.")
        window.input._submit()
    qtbot.waitUntil(lambda: texts(panel) == ["I'm vegetarian"])
    assert panel.isVisible() and panel.parentWidget() is window.memory.parentWidget()


def test_the_terminal_lists_adds_rewords_and_forgets_facts(demo_model):
    script = (
        "/facts\n/remember car: electric\nI'm vegetarian. Say hi.\n/facts\n"
        "/fact 2 I'm vegan\n/forget 1\n/forget 9\n/remember   \n/quit\n"
    )
    proc = terminal_chat(
        script, "--n-ctx", "1024", "--max-tokens", "8", "--temperature", "0", timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "no facts yet (/remember TEXT adds one)" in out
    assert "  1 car: electric  (yours)\n  2 I'm vegetarian\n" in out
    assert "  1 car: electric  (yours)\n  2 I'm vegan  (yours)\n" in out
    assert "  1 I'm vegan  (yours)\n" in out
    assert "there is no fact 9 (/facts numbers them)" in out
    assert "error: A fact needs some text." in out
