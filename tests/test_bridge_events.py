"""The window's signals come from the events modules: every event type has one, named
after it, emitted by its type; the bridge runs any intent on the engine's thread,
shows a failure with its kind, and announces each change once, on the GUI thread."""

from __future__ import annotations

import operator
import sys
import textwrap
import threading
import types
from collections.abc import Iterator

import pytest

pytest.importorskip("PySide6")

from vllmchat.core.app.events import (
    ConversationCreated,
    ConversationRenamed,
    EditRefused,
    Loaded,
    LoadStarted,
    PrefilledAhead,
    ToolPickChanged,
    TurnStarted,
)
from vllmchat.core.app.start import Storage, open_storage
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import PassagesUsed, ThoughtFor
from vllmchat.core.engine.events import (
    FIXES,
    DoneEvent,
    EngineError,
    ErrorKind,
    PrefillProgressEvent,
    TokenEvent,
    TurnStats,
)
from vllmchat.core.models.events import DownloadProgress
from vllmchat.core.tools.events import (
    Approval,
    ApprovalNeeded,
    ServerStatus,
    ToolCall,
    ToolInfo,
    ToolResult,
)
from vllmchat.core.tuning.events import QuantsCompared, TuneFinished
from vllmchat.ui.window.bridge.app_events import SIGNALS
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge
from vllmchat.ui.window.bridge.event_table import EVENT_MODULES, event_types, signal_name


def test_every_event_type_of_the_events_modules_has_one_signal():
    found = event_types()
    for event_type in (
        LoadStarted,
        Loaded,
        TokenEvent,
        DoneEvent,
        PassagesUsed,
        PrefilledAhead,
        ServerStatus,
        ApprovalNeeded,
        TuneFinished,
        QuantsCompared,
        ConversationCreated,
        EditRefused,
        ToolPickChanged,
        DownloadProgress,
    ):
        assert event_type in found, event_type
    for payload in (TurnStats, ToolInfo, ToolCall, ToolResult, Approval):
        assert payload not in found, f"{payload.__name__} is carried by events, not one"
    assert sorted(SIGNALS.values(), key=id) == sorted(found, key=id), "one signal per type"
    for module in EVENT_MODULES:
        assert module.__name__.endswith(".events")


def test_a_new_event_type_gets_its_signal_without_a_declaration(monkeypatch):
    module = types.ModuleType("vllmchat.core.somewhere.events")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # as an imported one is
    code = """
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Part:
            size: int

        @dataclass(frozen=True)
        class ThingMade:
            part: Part

        @dataclass(frozen=True)
        class ThingDropped:
            why: str

        @dataclass(frozen=True)
        class NoUnionYet:
            n: int

        SomewhereEvent = ThingDropped | ThingMade
    """
    exec(textwrap.dedent(code), module.__dict__)
    names = [t.__name__ for t in event_types([module])]
    assert names == ["ThingDropped", "ThingMade", "NoUnionYet"]


def test_signal_names_are_the_types_names_in_snake_case():
    assert signal_name(LoadStarted) == "load_started"
    assert signal_name(PrefillProgressEvent) == "prefill_progress_event"
    assert signal_name(type("MCPServerReady", (), {})) == "mcp_server_ready"
    assert SIGNALS["thought_for_event"] is ThoughtFor, "its plain name carries the seconds"


@pytest.fixture
def bridge(qtbot, tmp_path) -> Iterator[EngineBridge]:
    storage = open_storage(file=tmp_path / "c.sqlite3", kv_folder=tmp_path / "kv")
    assert isinstance(storage, Storage)
    made = EngineBridge(storage.app(AppSettings()))
    yield made
    made.close()
    assert not made.busy
    storage.close()


def _record(signal) -> list[tuple[object, ...]]:
    seen: list[tuple[object, ...]] = []
    signal.connect(lambda *args: seen.append(args))
    return seen


def test_publish_emits_by_type_with_the_older_names_and_the_fields(qtbot, bridge):
    events = bridge.events
    done = DoneEvent("Hi.", "eos")
    by_type, by_old_name = _record(events.done_event), _record(events.turn_finished)
    tokens, token_events = _record(events.token_received), _record(events.token_event)
    progress, thought = _record(events.prefill_progress), _record(events.thought_for)
    assert events.publish(done)
    token = TokenEvent("abc", 7)
    events.publish(token)
    events.publish(PrefillProgressEvent(3, 10))
    events.publish(ThoughtFor(1.5))
    assert by_type == [(done,)] and by_old_name == [(done,)]
    assert tokens == [("abc",)] and token_events == [(token,)]
    assert progress == [(3, 10)] and thought == [(1.5,)]
    assert events.signal(DoneEvent) is not None and events.tools is events
    assert not events.publish(None) and not events.publish("not an event")


def test_an_event_is_announced_once_however_it_is_handed_in(qtbot, bridge):
    renamed = _record(bridge.events.conversation_renamed)
    event = ConversationRenamed(1, "Zebras")
    bridge.events.publish(event)
    bridge.events.publish(event)
    bridge.events.publish(ConversationRenamed(1, "Zebras"))  # another one, alike
    assert len(renamed) == 2


def test_the_yielded_events_come_in_order_on_the_gui_thread(qtbot, bridge):
    gui = threading.current_thread()
    seen: list[tuple[object, threading.Thread]] = []
    for name in ("load_started", "token_received", "done_event"):
        getattr(bridge.events, name).connect(
            lambda value: seen.append((value, threading.current_thread()))
        )
    done = DoneEvent("ab", "eos")

    def intent() -> Iterator[object]:
        yield LoadStarted(live=False)
        yield TokenEvent("a", 1)
        yield TokenEvent("b", 2)
        yield done

    with qtbot.waitSignal(bridge.events.done_event):
        bridge.run(intent)
    assert [value for value, _ in seen] == [LoadStarted(live=False), "a", "b", done]
    assert all(thread is gui for _, thread in seen)


def test_an_engine_failure_is_shown_with_its_kind_and_fix(qtbot, bridge):
    def intent() -> Iterator[object]:
        yield from ()
        raise EngineError(ErrorKind.NO_MODEL, "No model is loaded.")

    with qtbot.waitSignal(bridge.events.turn_failed) as failed:
        bridge.run(intent)
    event = failed.args[0]
    assert event.kind == ErrorKind.NO_MODEL and event.message == "No model is loaded."
    assert event.fix == FIXES[ErrorKind.NO_MODEL]


def test_work_done_ahead_gives_way_to_a_turn_asked_for(qtbot, bridge):
    busy_seen: list[bool] = []

    def turn() -> Iterator[object]:
        yield from ()

    def ahead(*, busy) -> Iterator[object]:
        busy_seen.append(busy())
        yield from ()

    bridge.run_turn(turn)
    bridge.run_ahead(ahead)
    qtbot.waitUntil(lambda: not bridge.busy)
    assert busy_seen == [True], "a turn waits: the work ahead is told"
    bridge.events.publish_from_engine(TurnStarted(1))
    bridge.run_ahead(ahead)
    qtbot.waitUntil(lambda: not bridge.busy)
    assert busy_seen == [True, False]


def test_the_older_names_run_their_intents(qtbot, bridge):
    for name, old in EngineBridge.old_names().items():
        assert callable(operator.attrgetter(old.path)(bridge.app)), name
        assert callable(getattr(bridge, name)), name
    made = bridge.new_conversation()
    assert isinstance(made, ConversationCreated)
    renamed = _record(bridge.events.conversation_renamed)
    answer = bridge.rename_conversation(made.conversation_id, "Lighthouses")
    assert renamed == [(answer,)], "told by the owner and answered: announced once"
    refused = _record(bridge.events.edit_refused)
    bridge.rename_conversation(made.conversation_id + 99, "Nowhere")
    assert len(refused) == 1


def test_a_change_made_on_another_thread_arrives_on_the_gui_thread(qtbot, bridge):
    made = bridge.new_conversation()
    gui = threading.current_thread()
    arrived: list[threading.Thread] = []
    bridge.events.conversation_renamed.connect(
        lambda _event: arrived.append(threading.current_thread())
    )
    with qtbot.waitSignal(bridge.events.conversation_renamed) as renamed:
        elsewhere = threading.Thread(
            target=bridge.app.conversations.rename, args=(made.conversation_id, "Tides")
        )
        elsewhere.start()
        elsewhere.join()
    assert renamed.args[0].title == "Tides" and arrived == [gui]
