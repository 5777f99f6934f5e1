"""The window's voice with real widgets offscreen: the mic button held or clicked, the
words heard so far greyed in the box, a Piper-spoken sentence (a WAV file fed as the
microphone) written down by the real recogniser into the box or sent at once, replies
spoken piece by piece while they stream and silenced by typing, hands-free turns one
after the other, the Voice settings written, and failures said while the chat goes on.

CI has no audio devices: the microphone is a stand-in that feeds a WAV file to the
window's listening session in 30 ms chunks, as the Qt recorder does; speech goes to a
real ``Player`` where the machine has an output, else to a stand-in that records what
it is given and plays it on a fast clock.
"""

from __future__ import annotations

import wave
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialog

from vllmchat.core.app.voice.events import Heard, SpeakingEnded, SpokenPiece
from vllmchat.core.engine.events import DoneEvent
from vllmchat.core.voice.speaker import Speaker
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.voice.controls import HOLD_S, MicButton, MicState
from vllmchat.ui.voice.voice_dialog import VoiceDialog

SENTENCE = "Please turn off the lights in the kitchen before you leave."
CHUNK = 960  # bytes: 30 ms of 16 kHz mono 16-bit PCM


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c == " " else " " for c in text.lower()).split()


@pytest.fixture(scope="module")
def spoken_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sentence spoken by the Piper voice, as a 16 kHz mono WAV file (a microphone's)."""
    speech = Speaker().speak(SENTENCE)
    samples = np.frombuffer(speech.pcm, dtype="<i2").astype(np.float32)
    count = int(len(samples) * 16000 / speech.sample_rate)
    at = np.linspace(0, len(samples) - 1, count)
    pcm = np.interp(at, np.arange(len(samples)), samples).astype("<i2").tobytes()
    silence = b"\0\0" * 8000  # half a second before and after, as a speaker leaves
    path = tmp_path_factory.mktemp("mic") / "spoken.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(silence + pcm + silence)
    return path


class WavMicrophone(QObject):
    """A stand-in for the Qt recorder: the WAV file's samples in 30 ms chunks, in real
    time, then silence (``trailing_s`` of it) until stopped; ``fail_after`` chunks it
    fails as an unplugged microphone does."""

    def __init__(
        self,
        path: Path | None,
        on_pcm: Callable[[bytes], None],
        on_failed: Callable[[str], None],
        *,
        fail_at_start: str = "",
        fail_after: int = 0,
    ) -> None:
        super().__init__()
        pcm = b""
        if path is not None:
            with wave.open(str(path), "rb") as wav:
                pcm = wav.readframes(wav.getnframes())
        self.chunks = [pcm[i : i + CHUNK] for i in range(0, len(pcm), CHUNK)]
        self.on_pcm, self.on_failed = on_pcm, on_failed
        self.fail_at_start, self.fail_after = fail_at_start, fail_after
        self.level = 0.0
        self.sent = 0
        self.started = self.stopped = False
        self.timer = QTimer(self)
        self.timer.setInterval(30)
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.started = True
        if self.fail_at_start:
            self.on_failed(self.fail_at_start)
            return
        self.timer.start()

    def stop(self) -> None:
        self.stopped = True
        self.timer.stop()

    def _tick(self) -> None:
        chunk = self.chunks[self.sent] if self.sent < len(self.chunks) else b"\0" * CHUNK
        self.sent += 1
        samples = np.frombuffer(chunk, dtype="<i2").astype(np.float32) / 32768
        self.level = float(np.sqrt(np.mean(samples**2))) if len(samples) else 0.0
        self.on_pcm(chunk)
        if self.fail_after and self.sent >= self.fail_after:
            self.timer.stop()
            self.on_failed(
                "The microphone “Stand-in” stopped (unplugged?): what was recorded is kept"
            )


class PlayerStandIn(QObject):
    """Records the pieces it is given and 'plays' them ten times faster than real time."""

    idle = Signal()
    failed = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[tuple[bytes, int]] = []
        self.stops = 0
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self.idle)

    @property
    def playing(self) -> bool:
        return self.timer.isActive()

    def play(self, pcm: bytes, sample_rate: int) -> None:
        self.pieces.append((pcm, sample_rate))
        left = self.timer.remainingTime() if self.timer.isActive() else 0
        self.timer.start(left + int(len(pcm) / 2 / sample_rate * 100))

    def stop(self) -> None:
        self.stops += 1
        self.timer.stop()


class NoSpeakers(PlayerStandIn):
    """A player whose output cannot be had, as the Qt player says it."""

    def play(self, pcm: bytes, sample_rate: int) -> None:
        self.failed.emit("No speakers or headphones found: connect some")


def _player(device_id: str) -> object:
    """A real player where the machine has an output (recording what it is handed),
    else the stand-in."""
    try:
        from PySide6.QtMultimedia import QMediaDevices

        from vllmchat.audio.player import Player
    except ImportError:
        return PlayerStandIn()
    if not QMediaDevices.audioOutputs():
        return PlayerStandIn()

    class RecordingPlayer(Player):
        def __init__(self) -> None:
            super().__init__(device_id)
            self.pieces: list[tuple[bytes, int]] = []
            self.stops = 0

        def play(self, pcm: bytes, sample_rate: int) -> None:
            self.pieces.append((pcm, sample_rate))
            super().play(pcm, sample_rate)

        def stop(self) -> None:
            self.stops += 1
            super().stop()

    return RecordingPlayer()


@pytest.fixture
def voice_window(demo_window, spoken_wav: Path) -> Iterator:
    """The demo window with the WAV microphone and a recording player; the recogniser
    warmed up (its model loaded) so that partial text comes while the user speaks."""
    w, _store, _settings = demo_window
    mics: list[WavMicrophone] = []

    def microphone(device_id: str, on_pcm, on_failed) -> WavMicrophone:
        mic = WavMicrophone(spoken_wav, on_pcm, on_failed)
        mics.append(mic)
        return mic

    players: list = []

    def player(device_id: str) -> object:
        players.append(_player(device_id))
        return players[-1]

    w.voice.listening.make_recorder = microphone
    w.voice.reply.make_player = player
    list(w.bridge.app.voice.transcribe_pcm(_silence_audio()))
    yield w, mics, players


def _silence_audio():
    from vllmchat.core.voice.transcriber import PcmAudio

    return PcmAudio(b"\0\0" * 16000, 16000)


def _configure(qtbot, w, **changes) -> None:
    with qtbot.waitSignal(w.bridge.events.settings_changed, timeout=10_000):
        w.bridge.configure(**changes)


# -- the widgets ------------------------------------------------------------------------
def test_the_mic_is_held_to_talk_or_clicked_to_start_and_stop(qtbot):
    mic = MicButton()
    qtbot.addWidget(mic)
    mic.show()
    asked: list[str] = []
    mic.talk_started.connect(lambda: (asked.append("start"), mic.set_state(MicState.LISTENING)))
    mic.talk_ended.connect(lambda: (asked.append("end"), mic.set_state(MicState.HEARING)))
    QTest.mousePress(mic, Qt.MouseButton.LeftButton)
    QTest.qWait(int(HOLD_S * 1000) + 150)
    QTest.mouseRelease(mic, Qt.MouseButton.LeftButton)
    assert asked == ["start", "end"]  # held: the release ends it
    mic.set_state(MicState.IDLE)
    asked.clear()
    QTest.mouseClick(mic, Qt.MouseButton.LeftButton)
    assert asked == ["start"]  # a click: it goes on listening
    QTest.mouseClick(mic, Qt.MouseButton.LeftButton)
    assert asked == ["start", "end"]  # the second click ends it
    QTest.mouseClick(mic, Qt.MouseButton.LeftButton)
    assert asked == ["start", "end"]  # while it writes down, a press asks nothing


def test_words_heard_show_greyed_and_the_transcript_lands_beside_what_was_typed(qtbot):
    box = ChatInput()
    qtbot.addWidget(box)
    box.show()
    QTest.keyClicks(box.edit, "Also:")
    box.show_partial("turn off")
    assert box.edit.toPlainText() == "Also: turn off"
    assert box.typed_text() == "Also:"
    QTest.keyClicks(box.edit, " note")  # typed while speaking: kept, before the grey words
    box.show_partial("turn off the lights")
    assert box.edit.toPlainText() == "Also: note turn off the lights"
    grey = box.partial
    assert grey is not None and grey.charFormat().fontItalic()
    box.land("Turn off the lights.")
    assert box.edit.toPlainText() == "Also: note Turn off the lights."
    assert box.partial is None
    sent: list[str] = []
    box.send_requested.connect(sent.append)
    box.show_partial("and more")
    QTest.keyClick(box.edit, Qt.Key.Key_Return)  # the grey words are not sent
    assert sent == ["Also: note Turn off the lights."]
    assert box.edit.toPlainText() == ""


def test_the_voice_dialog_offers_what_is_there_and_keeps_a_missing_choice(qtbot):
    from vllmchat.core.app_settings import AppSettings

    settings = AppSettings.of(voice_input_device="usb-mic-gone", voice_speed=1.25)
    dialog = VoiceDialog(
        settings,
        voices=[("en_US-joe-medium", "en_US-joe-medium (en_US)")],
        inputs=[("mic-1", "Built-in microphone")],
        outputs=[],
        problems=["No speakers or headphones found"],
    )
    qtbot.addWidget(dialog)
    assert dialog.problems.text() == "No speakers or headphones found"
    assert dialog.input.currentText() == "usb-mic-gone (not found)"
    assert dialog.speed_label.text() == "1.25×"
    dialog.input.setCurrentIndex(dialog.input.findData("mic-1"))
    dialog.language.setCurrentIndex(dialog.language.findData("de"))
    dialog.accept()
    assert dialog.changes() == {"voice_input_device": "mic-1", "voice_language": "de"}


def test_the_voice_dialog_picks_an_installed_speech_model_and_adds_a_downloaded_one(qtbot):
    from vllmchat.core.app.voice.downloads import VoiceModelReady
    from vllmchat.core.app_settings import AppSettings

    dialog = VoiceDialog(
        AppSettings(),
        voices=[],
        inputs=[],
        outputs=[],
        recognisers=["whisper-base", "whisper-small"],
    )
    qtbot.addWidget(dialog)
    box = dialog.recogniser
    shown = [box.itemText(i) for i in range(box.count())]
    assert shown == ["whisper-base (fastest)", "whisper-small"]  # base once, as the default
    dialog._model_ready(VoiceModelReady("whisper-large", "whisper", Path("/x")))
    assert box.findData("whisper-large") == 2
    box.setCurrentIndex(box.findData("whisper-small"))
    dialog.accept()
    assert dialog.changes() == {"voice_recogniser": "whisper-small"}


# -- the window, with the real recogniser, voice and demo model ---------------------------
def test_held_mic_writes_down_a_spoken_sentence_into_the_box(qtbot, voice_window):
    w, mics, _players = voice_window
    QTest.keyClicks(w.input.edit, "Note:")
    partials: list[str] = []
    w.voice.listening.partial.connect(partials.append)
    levels: list[float] = []
    w.voice.listening.level.connect(levels.append)
    mic = w.voice.controls.mic
    QTest.mousePress(mic, Qt.MouseButton.LeftButton)
    assert mic.state is MicState.LISTENING and w.voice.controls.meter.isVisible()
    qtbot.waitUntil(lambda: mics[0].sent >= len(mics[0].chunks), timeout=20_000)
    assert max(levels) > 0.01  # the meter moved while the sentence was spoken
    # still held: the words heard so far show greyed after what was typed
    qtbot.waitUntil(lambda: bool(partials) and w.input.partial is not None, timeout=20_000)
    grey = w.input.partial
    assert grey.charFormat().fontItalic() and grey.selectedText().strip() == partials[-1]
    assert w.input.typed_text() == "Note:"
    with qtbot.waitSignal(w.voice.listening.heard, timeout=30_000) as heard:
        QTest.mouseRelease(mic, Qt.MouseButton.LeftButton)  # held: push-to-talk ends
    assert isinstance(heard.args[0], Heard)
    assert _words(w.input.edit.toPlainText()) == ["note", *_words(SENTENCE)]
    assert w.input.partial is None  # the grey words are gone, the transcript is plain
    qtbot.waitUntil(lambda: mic.state is MicState.IDLE, timeout=5_000)
    assert mics[0].stopped
    assert w.last_turn is None  # it waits in the box, editable: nothing was sent
    QTest.mouseClick(mic, Qt.MouseButton.LeftButton)  # the window closes while it listens
    assert mic.state is MicState.LISTENING and len(mics) == 2


def test_hands_free_sends_at_once_speaks_the_reply_and_listens_again(qtbot, voice_window):
    w, mics, players = voice_window
    _configure(qtbot, w, voice_hands_free=True, voice_speak_replies=True)
    assert w.voice.controls.hands_free.isChecked()
    assert w.voice.controls.speak_replies.isChecked()
    pieces: list[SpokenPiece] = []
    w.bridge.events.spoken_piece.connect(pieces.append)
    ended: list[SpeakingEnded] = []
    w.bridge.events.speaking_ended.connect(ended.append)
    with qtbot.waitSignal(w.turn_ended, timeout=60_000):
        QTest.mouseClick(w.voice.controls.mic, Qt.MouseButton.LeftButton)  # one click
    sent = w.stored.messages(w.conversation_id)
    assert _words(sent[0].content) == _words(SENTENCE)  # ended at silence, sent at once
    assert w.input.edit.toPlainText() == ""
    qtbot.waitUntil(lambda: bool(ended), timeout=60_000)
    assert pieces and players, "the reply was not spoken"
    assert [p[0] for p in players[-1].pieces] == [p.pcm for p in pieces]
    assert all(rate == 22050 for _pcm, rate in players[-1].pieces)
    # once the reply has been heard, the mic listens again by itself
    qtbot.waitUntil(lambda: len(mics) == 2, timeout=30_000)
    assert w.voice.listening.state is MicState.LISTENING
    QTest.keyClick(w.input.edit, Qt.Key.Key_Escape)  # Esc drops the recording
    qtbot.waitUntil(lambda: w.voice.listening.state is MicState.IDLE, timeout=5_000)
    assert not w.voice.hands_free_turns


def test_typing_silences_a_reply_being_spoken(qtbot, voice_window):
    w, _mics, players = voice_window
    _configure(qtbot, w, voice_speak_replies=True, max_tokens=120)
    ended: list[SpeakingEnded] = []
    w.bridge.events.speaking_ended.connect(ended.append)
    with qtbot.waitSignal(w.bridge.events.spoken_piece, timeout=60_000):
        w.send("Tell me a long story about a dog and a cat.")
    qtbot.waitUntil(lambda: bool(players) and bool(players[-1].pieces), timeout=10_000)
    QTest.keyClick(w.input.edit, Qt.Key.Key_H)  # barge-in
    player = players[-1]
    assert player.stops >= 1 and not w.voice.reply.speaking
    handed = len(player.pieces)
    qtbot.waitUntil(lambda: bool(ended), timeout=60_000)
    qtbot.waitUntil(lambda: w.last_turn is not None, timeout=60_000)
    assert len(player.pieces) == handed  # nothing more reached the speakers
    assert w.input.edit.toPlainText() == "h"  # what was typed is kept


def test_the_engine_is_free_while_a_long_reply_is_still_spoken(qtbot, voice_window):
    w, _mics, players = voice_window
    _configure(qtbot, w, voice_speak_replies=True, max_tokens=120)
    pieces: list[SpokenPiece] = []
    w.bridge.events.spoken_piece.connect(pieces.append)
    ended: list[SpeakingEnded] = []
    w.bridge.events.speaking_ended.connect(ended.append)
    with qtbot.waitSignal(w.turn_ended, timeout=60_000):
        w.send("Tell me a long story about a dog and a cat.")
    assert isinstance(w.last_turn, DoneEvent)
    assert not ended and w.voice.reply.speaking  # the reply is still being said
    worker = w.bridge.run(w.bridge.app.watch)  # the next intent, on the engine's thread
    assert worker is not None
    with qtbot.waitSignal(worker.finished, timeout=5_000):
        pass
    assert not ended and w.voice.reply.speaking  # it ran while the reply goes on
    qtbot.waitUntil(lambda: len(pieces) >= 2, timeout=30_000)  # spoken on, from the pool
    QTest.keyClick(w.input.edit, Qt.Key.Key_Escape)  # barge-in after the turn
    player = players[-1]
    assert player.stops >= 1 and not w.voice.reply.speaking
    handed = len(player.pieces)
    qtbot.waitUntil(lambda: bool(ended), timeout=5_000)
    assert ended[-1].stopped
    QTest.qWait(300)
    assert len(player.pieces) == handed  # nothing more reached the speakers


def test_a_new_turn_silences_the_reply_still_being_spoken(qtbot, voice_window):
    w, _mics, players = voice_window
    _configure(qtbot, w, voice_speak_replies=True, max_tokens=120)
    ended: list[SpeakingEnded] = []
    w.bridge.events.speaking_ended.connect(ended.append)
    with qtbot.waitSignal(w.turn_ended, timeout=60_000):
        w.send("Tell me a long story about a dog and a cat.")
    qtbot.waitUntil(lambda: bool(players) and bool(players[-1].pieces), timeout=10_000)
    assert not ended
    stops = players[-1].stops
    with qtbot.waitSignal(w.turn_ended, timeout=60_000):
        w.send("Now tell me about a bird.")
    assert ended and ended[0].stopped  # the first reply was cut short, and not played on
    assert players[-1].stops > stops
    assert w.voice.reply.speaking  # the second one is being said
    QTest.keyClick(w.input.edit, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: len(ended) == 2, timeout=5_000)
    assert ended[1].stopped


def test_voice_settings_are_written_and_the_voice_is_tried(qtbot, voice_window):
    w, _mics, players = voice_window
    w.voice.open_settings()
    qtbot.waitUntil(lambda: w.voice.dialog is not None, timeout=60_000)
    dialog = w.voice.dialog
    assert dialog.voice.count() >= 2  # the default, and the installed voice
    dialog.speed.setValue(130)
    dialog.language.setCurrentIndex(dialog.language.findData("en"))
    dialog.send_at_once.setChecked(True)
    with qtbot.waitSignal(w.voice.reply.spoken, timeout=60_000):
        dialog.test_button.click()
    assert players and players[-1].pieces
    with qtbot.waitSignal(w.bridge.events.settings_changed, timeout=10_000):
        dialog.done(QDialog.DialogCode.Accepted)
    s = w.settings
    assert (s.voice_speed, s.voice_language, s.voice_send_at_once) == (1.3, "en", True)


def test_missing_models_a_microphone_or_speakers_that_fail_are_said_and_nothing_is_lost(
    qtbot, voice_window, spoken_wav
):
    w, _mics, _players = voice_window
    from vllmchat.core.app.voice.service import VoiceReadiness

    missing = "speech to text: no Whisper model: download whisper-base in the voice settings"
    w.voice.readiness = VoiceReadiness(can_listen=False, can_speak=True, missing=(missing,))
    QTest.mouseClick(w.voice.controls.mic, Qt.MouseButton.LeftButton)
    assert w.voice.listening.state is MicState.IDLE  # nothing recorded that cannot be heard
    assert w.notice.isVisible() and missing in w.notice.text()
    w.notice.close()
    w.voice.readiness = None  # looked for again
    w.voice.listening.make_recorder = lambda _id, on_pcm, on_failed: WavMicrophone(
        None, on_pcm, on_failed, fail_at_start="No microphone found: connect one"
    )
    _configure(qtbot, w, voice_hands_free=True)
    QTest.mouseClick(w.voice.controls.mic, Qt.MouseButton.LeftButton)
    assert w.voice.listening.state is MicState.IDLE
    assert not w.voice.hands_free_turns  # no hands-free turns without a microphone
    _configure(qtbot, w, voice_hands_free=False)
    assert "No microphone found" in w.input.notice.text() and w.input.notice.isVisible()
    w.voice.listening.make_recorder = lambda _id, on_pcm, on_failed: WavMicrophone(
        spoken_wav, on_pcm, on_failed, fail_after=int(3.2 / 0.03)
    )
    with qtbot.waitSignal(w.voice.listening.heard, timeout=30_000) as heard:
        QTest.mouseClick(w.voice.controls.mic, Qt.MouseButton.LeftButton)
    assert "unplugged" in w.input.notice.text() and w.input.notice.isVisible()
    assert heard.args[0].text and _words(heard.args[0].text)[:3] == _words(SENTENCE)[:3]
    assert _words(w.input.edit.toPlainText())[:3] == _words(SENTENCE)[:3]
    # and speakers that cannot be had: said, speaking replies switched off, the chat goes on
    _configure(qtbot, w, voice_speak_replies=True)
    w.voice.reply.make_player = lambda _id: NoSpeakers()
    with qtbot.waitSignal(w.turn_ended, timeout=60_000):
        w.input.submit()
    assert isinstance(w.last_turn, DoneEvent)
    qtbot.waitUntil(lambda: not w.settings.voice_speak_replies, timeout=30_000)
    assert (
        "No speakers" in w.input.notice.text() and "Speak replies is off" in w.input.notice.text()
    )
    assert not w.voice.controls.speak_replies.isChecked()


def test_a_voice_is_downloaded_from_the_settings_and_offered_to_pick(
    qtbot, hub, tmp_path, monkeypatch
):
    from tests.test_voice_models import LESSAC, _piper_files
    from vllmchat.core.app_settings import AppSettings
    from vllmchat.core.voice.catalogue import PIPER_REPO

    monkeypatch.setenv("VLLMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    onnx, meta = _piper_files(tmp_path / "hub-files", size=1_200_000)
    hub.add(PIPER_REPO, {f"{LESSAC}.onnx": onnx, f"{LESSAC}.onnx.json": meta})
    dialog = VoiceDialog(AppSettings(), voices=[], inputs=[], outputs=[])
    qtbot.addWidget(dialog)
    models = dialog.models
    models.pick("en_US-lessac-medium")
    assert models.download.isEnabled()
    shown: list[int] = []
    models.progress.valueChanged.connect(shown.append)
    hub.faults.bytes_per_s = 300_000  # slow enough to be stopped halfway
    models.download.click()
    qtbot.waitUntil(lambda: bool(shown) and shown[-1] > 0, timeout=20_000)
    models.cancel.click()
    qtbot.waitUntil(lambda: not models.busy, timeout=20_000)
    assert models.list.currentItem().text().endswith("kept, resumes")
    hub.faults.bytes_per_s = None
    with qtbot.waitSignal(dialog.models_changed, timeout=30_000):
        models.download.click()
    qtbot.waitUntil(lambda: not models.busy, timeout=10_000)
    assert shown and max(shown) == 1000
    assert dialog.voice.findData("en_US-lessac-medium") >= 0  # offered to pick
    assert models.list.currentItem().text().endswith("installed")
    assert not models.download.isEnabled()
    dialog.reject()


def test_a_recording_that_cannot_be_written_down_is_kept_as_a_wav_file(qtbot, spoken_wav):
    """The recogniser fails (its process died): the message says where the recording is."""
    from vllmchat.core.app.voice.events import ListenFailed, SpeechEnded
    from vllmchat.core.app.voice.listening import ListenSession
    from vllmchat.ui.common.workers import Worker
    from vllmchat.ui.voice.listening import ListenFlow

    class DyingRecogniser:
        """Never asked: the session's events below are the recogniser's failure."""

    class Listener:
        def listen(self, *, hands_free: bool):
            session = ListenSession(DyingRecogniser(), hands_free=hands_free, language=None)
            events = [SpeechEnded(3.0), ListenFailed("the speech recogniser stopped")]
            worker = Worker(lambda: (e for e in events), lambda exc: None, name="Listening")
            self.session, self.worker = session, worker
            return session, worker

    listener = Listener()

    class Settings:
        voice_input_device = ""

    flow = ListenFlow(
        listener, Settings, make_recorder=lambda *args: WavMicrophone(spoken_wav, *args[1:])
    )
    failures: list[str] = []
    flow.failed.connect(failures.append)
    assert flow.start(hands_free=False)
    qtbot.waitUntil(lambda: flow.recorder is not None and flow.recorder.sent > 20, timeout=5_000)
    listener.worker.start()
    qtbot.waitUntil(lambda: bool(failures), timeout=5_000)
    qtbot.waitUntil(lambda: flow.state is MicState.IDLE, timeout=5_000)
    message = failures[0]
    assert message.startswith("Nothing was written down: the speech recogniser stopped.")
    kept = Path(message.split("The recording is kept in ")[1])
    with wave.open(str(kept)) as wav:
        assert (wav.getframerate(), wav.getnchannels()) == (16000, 1)
        assert wav.getnframes() >= 20 * 480


def test_the_voices_events_have_their_signals_and_pieces_need_no_snapshot():
    from vllmchat.core.app.voice import events as voice_events
    from vllmchat.ui.window.bridge.app_events import SIGNALS, STREAMED
    from vllmchat.ui.window.bridge.event_table import EVENT_MODULES, event_types

    assert voice_events in EVENT_MODULES
    names = {t: n for n, t in SIGNALS.items()}
    for event_type in event_types([voice_events]):
        assert event_type in names
    assert names[Heard] == "heard" and names[SpokenPiece] == "spoken_piece"
    assert names[SpeakingEnded] == "speaking_ended"
    assert SpokenPiece in STREAMED  # many per reply, none changes the application's state


def test_the_voice_picker_names_a_voice_by_its_speaker_language_and_quality() -> None:
    from vllmchat.ui.window.voice_wiring import voice_label

    assert voice_label("en_US-joe-medium", "en_US") == "Joe (en_US, medium)"
    named = voice_label("de_DE-thorsten_emotional-medium", "")
    assert named == "Thorsten Emotional (de_DE, medium)"
    assert voice_label("my-voice", "en") == "my-voice (en)"
