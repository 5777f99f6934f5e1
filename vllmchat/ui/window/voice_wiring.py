"""The window's voice, wired: the mic and its toggles beside Send, what is heard into
the message box (greyed while the user speaks, then editable, or sent at once), replies
spoken as they stream and cut short by the mic, typing, Esc or Stop, hands-free turns
one after the other, the Voice menu and its settings.

Every failure is a line in the status bar (or a notice where something must be
installed or plugged in); the chat goes on, and nothing typed or recorded is lost.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog

from vllmchat.core.app.voice.events import Heard, SpeakFailed, SpeakingEnded
from vllmchat.core.app.voice.service import VoiceChoice, VoiceReadiness
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.engine.events import DoneEvent, ErrorEvent
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.voice.controls import MicState, VoiceControls
from vllmchat.ui.voice.listening import ListenFlow
from vllmchat.ui.voice.speaking import ReplyVoice
from vllmchat.ui.voice.voice_dialog import Choice, VoiceDialog
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge

MESSAGE_MS = 20_000
AGAIN_MS = 300  # hands-free: a breath between the reply's end and listening again


def devices() -> tuple[list[Choice], list[Choice], list[str]]:
    """The microphones and the outputs, and what keeps either from working."""
    try:
        from vllmchat.audio.devices import NO_INPUT, NO_OUTPUT, input_devices, output_devices
    except (ImportError, RuntimeError) as exc:  # Qt Multimedia missing
        return [], [], [f"Audio in and out: {exc}"]
    inputs = [(d.id, d.description) for d in input_devices()]
    outputs = [(d.id, d.description) for d in output_devices()]
    problems = ([] if inputs else [NO_INPUT]) + ([] if outputs else [NO_OUTPUT])
    return inputs, outputs, problems


class VoiceWiring(QObject):
    """Made by the window once its parts exist (``window.bridge``, ``window.input``)."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window: Any = window  # the main window: its status bar, model, notices
        self.bridge: EngineBridge = window.bridge
        self.input: ChatInput = window.input
        self.controls = VoiceControls()
        self.input.add_beside_send(self.controls)
        self.listening = ListenFlow(self.bridge.voice, self.settings, parent=self)
        self.reply = ReplyVoice(self.bridge.voice.stop_speaking, self.settings, parent=self)
        self.readiness: VoiceReadiness | None = None  # once asked (the first use)
        self.hands_free_turns = False  # a hands-free conversation goes on
        self.awaiting_reply = False  # what was heard was sent; listen again after the reply
        self.spoken_turn = False  # this turn's reply is being spoken
        self.turn_running = False
        self.last_partial = ""  # the words heard so far, kept if the transcript fails
        self.dialog: VoiceDialog | None = None
        self._wire()
        self._menu()
        self._show_settings()

    def settings(self) -> AppSettings:
        return self.bridge.snapshot.settings

    def _wire(self) -> None:
        e, c, listening = self.bridge.events, self.controls, self.listening
        c.mic.talk_started.connect(self.talk)
        c.mic.talk_ended.connect(listening.finish)
        c.hands_free.toggled.connect(self.set_hands_free)
        c.speak_replies.toggled.connect(self.set_speak_replies)
        listening.state_changed.connect(c.set_state)
        listening.state_changed.connect(self._on_listen_state)
        listening.level.connect(c.meter.set_level)
        listening.partial.connect(self._on_partial)
        listening.heard.connect(self._on_heard)
        listening.failed.connect(self._on_listen_failed)
        listening.warned.connect(self.say)
        e.spoken_piece.connect(self.reply.piece)
        e.speaking_ended.connect(self.reply.ended)
        e.speak_failed.connect(self._on_speak_failed)
        e.turn_started.connect(self._on_turn_started)
        e.turn_finished.connect(self._on_turn_done)
        e.turn_failed.connect(self._on_turn_failed)
        e.settings_changed.connect(self._show_settings)
        self.reply.spoken.connect(self._on_reply_spoken)
        self.reply.failed.connect(self._on_play_failed)
        self.input.edit.typed.connect(self._on_typed)
        self.input.stop_requested.connect(self._on_stop)
        self.bridge.voice.closing.connect(self.close)

    def _menu(self) -> None:
        bar = self.window.menuBar()
        last = bar.actions()[-1] if bar.actions() else None  # Help stays last
        voice = bar.addMenu("&Voice")
        if last is not None:
            bar.insertMenu(last, voice)
        self.talk_action = QAction("Talk (start or end)", self)
        self.talk_action.setShortcut(QKeySequence("Ctrl+Shift+Space"))
        self.talk_action.triggered.connect(self.talk_or_finish)
        self.stop_action = QAction("Stop speaking", self)
        self.stop_action.triggered.connect(self.stop_speaking)
        self.settings_action = QAction("Voice settings…", self)
        self.settings_action.triggered.connect(self.open_settings)
        for action in (self.talk_action, self.controls.hands_free, self.controls.speak_replies):
            voice.addAction(action)
        voice.addAction(self.stop_action)
        voice.addSeparator()
        voice.addAction(self.settings_action)
        self.menu = voice

    # -- listening ----------------------------------------------------------------------
    def talk(self) -> None:
        """The mic pressed: any speaking stops, and listening starts."""
        self.stop_speaking()
        self.input.show_notice("", 0)
        if self.readiness is None:
            self._ask_readiness()
        elif not self.readiness.can_listen:
            self._not_ready("Speech to text is not installed", self.readiness)
            return
        hands_free = self.settings().voice_hands_free
        self.awaiting_reply = False
        self.hands_free_turns = self.listening.start(hands_free=hands_free) and hands_free

    def talk_or_finish(self) -> None:
        """The menu's Talk: start listening, or end what is being said."""
        if self.listening.state is MicState.LISTENING:
            self.listening.finish()
        elif self.listening.state is MicState.IDLE:
            self.talk()

    def _on_partial(self, text: str) -> None:
        self.last_partial = text
        self.input.show_partial(text)

    def _on_listen_state(self, state: MicState) -> None:
        if state is MicState.LISTENING:
            self.last_partial = ""
        elif state is MicState.IDLE:
            self.input.clear_partial()  # cancelled, or ended: what was heard has landed

    def _on_heard(self, event: Heard) -> None:
        if not event.text.strip():
            self.input.clear_partial()
            paused = " Hands-free listening paused: press the mic to go on." * bool(
                self.hands_free_turns
            )
            self.say(f"Nothing was heard.{paused}")
            self.hands_free_turns = False
            return
        self.input.land(event.text)
        if not (self.listening.hands_free or self.settings().voice_send_at_once):
            return  # it waits in the box, editable
        if self.window.info is None or not self.input.send.isEnabled():
            after = "a model is loaded" if self.window.info is None else "the reply is done"
            self.say(f"What you said waits in the box: send it once {after}.")
            self.hands_free_turns = False
            return
        self.awaiting_reply = self.hands_free_turns
        self.input.submit()

    def _on_listen_failed(self, message: str) -> None:
        self.hands_free_turns = False
        if self.last_partial:
            self.input.land(self.last_partial)  # the words heard so far stay, editable
            self.last_partial = ""
        self.say(message)

    def _listen_again(self) -> None:
        if self.hands_free_turns and self.awaiting_reply and not self.listening.active:
            self.awaiting_reply = False
            if not self.listening.start(hands_free=True):
                self.hands_free_turns = False

    # -- speaking -----------------------------------------------------------------------
    def stop_speaking(self) -> None:
        """Barge-in: silent at once, and the rest of the reply is not spoken."""
        if self.reply.speaking:
            self.reply.barge_in()
            self.spoken_turn = False

    def _on_turn_started(self, _event: object) -> None:
        self.turn_running = True
        self.spoken_turn = self.settings().voice_speak_replies
        if self.spoken_turn:
            self.reply.begin()

    def _on_turn_done(self, _event: DoneEvent) -> None:
        self.turn_running = False
        if not self.spoken_turn:
            QTimer.singleShot(AGAIN_MS, self._listen_again)

    def _on_turn_failed(self, _event: ErrorEvent) -> None:
        self.turn_running = False
        self.hands_free_turns = self.awaiting_reply = False  # the failure is shown as it is

    def _on_reply_spoken(self) -> None:
        self.spoken_turn = False
        QTimer.singleShot(AGAIN_MS, self._listen_again)

    def _on_speak_failed(self, event: SpeakFailed) -> None:
        self.spoken_turn = False
        self.reply.made_ended = True
        self.say(f"The reply cannot be spoken: {event.message}.{self._speaking_off()}")
        if not self.turn_running:  # else listening starts again at the turn's end
            QTimer.singleShot(AGAIN_MS, self._listen_again)

    def _on_play_failed(self, message: str) -> None:
        self.spoken_turn = False
        self.hands_free_turns = False
        self.say(f"{message}.{self._speaking_off()}")

    def _speaking_off(self) -> str:
        """Speak replies switched off after a failure (each reply would fail alike)."""
        if not self.settings().voice_speak_replies:
            return ""
        self.bridge.configure(voice_speak_replies=False)
        return " Speak replies is off."

    def _on_typed(self) -> None:
        """The user types: speaking stops, and hands-free turns give way to typing."""
        if self.reply.speaking:
            self.stop_speaking()
            self.hands_free_turns = False

    def _on_stop(self) -> None:
        """Esc or Stop: speaking stops, a recording under way is dropped."""
        self.stop_speaking()
        self.hands_free_turns = self.awaiting_reply = False
        self.listening.cancel()

    # -- settings -----------------------------------------------------------------------
    def set_hands_free(self, on: bool) -> None:
        self.bridge.configure(voice_hands_free=on)
        if not on:
            self.hands_free_turns = self.awaiting_reply = False

    def set_speak_replies(self, on: bool) -> None:
        self.bridge.configure(voice_speak_replies=on)
        if not on:
            self.stop_speaking()

    def _show_settings(self, *_: object) -> None:
        s = self.settings()
        self.controls.show_settings(
            hands_free=s.voice_hands_free, speak_replies=s.voice_speak_replies
        )

    def open_settings(self) -> None:
        """The Voice settings, once what is installed is known (found off this thread)."""
        self.settings_action.setEnabled(False)
        self.bridge.voice.check(self._show_dialog, self._check_failed)

    def _check_failed(self, exc: Exception) -> None:
        self.settings_action.setEnabled(True)
        self.say(f"The voice's models could not be looked for: {exc}")

    def _show_dialog(self, found: tuple[VoiceReadiness, list[VoiceChoice]]) -> None:
        readiness, voices = found
        self.readiness = readiness
        self.settings_action.setEnabled(True)
        inputs, outputs, problems = devices()
        dialog = VoiceDialog(
            self.settings(),
            voices=[(v.name, voice_label(v.name, v.language)) for v in voices],
            inputs=inputs,
            outputs=outputs,
            problems=[*readiness.missing, *problems],
            recognisers=readiness.recognisers,
            parent=self.window,
        )
        dialog.test_requested.connect(self._test_voice)
        dialog.models_changed.connect(self._forget_readiness)
        dialog.finished.connect(self._dialog_closed)
        self.dialog = dialog
        dialog.open()  # window-modal; the window goes on painting and streaming

    def _forget_readiness(self) -> None:
        self.readiness = None  # looked for again at the next use

    def _test_voice(self, text: str, voice: str, speed: float) -> None:
        self.stop_speaking()
        device = self.dialog.output.currentData() if self.dialog is not None else None
        self.reply.begin(device)
        worker = self.bridge.voice.speak_text(text, voice=voice or None, speed=speed)
        worker.finished.connect(self._test_spoken)

    def _test_spoken(self) -> None:
        if not self.reply.made_ended:
            self.reply.ended(SpeakingEnded(stopped=False))

    def _dialog_closed(self, result: int) -> None:
        dialog, self.dialog = self.dialog, None
        if dialog is None:
            return
        if result == QDialog.DialogCode.Accepted and (changes := dialog.changes()):
            self.bridge.configure(**changes)
            if changes.get("voice_speak_replies") is False:
                self.stop_speaking()
        dialog.deleteLater()

    # -- what is missing ------------------------------------------------------------------
    def _ask_readiness(self) -> None:
        self.bridge.voice.check(self._on_readiness, lambda _exc: None)

    def _on_readiness(self, found: tuple[VoiceReadiness, list[VoiceChoice]]) -> None:
        self.readiness = found[0]
        if not self.readiness.can_listen and self.listening.active:
            self.listening.cancel()
            self._not_ready("Speech to text is not installed", self.readiness)

    def _not_ready(self, what: str, readiness: VoiceReadiness) -> None:
        lines = "\n".join(f"• {line}" for line in readiness.missing)
        self.window.show_notice("Voice", f"{what}:\n{lines}")

    def say(self, message: str) -> None:
        """Tell the user, above the message box (and in the status bar)."""
        self.input.show_notice(message, MESSAGE_MS)
        self.window.statusBar().showMessage(message, MESSAGE_MS)

    def close(self) -> None:
        self.listening.close()
        self.reply.close()


def voice_label(name: str, language: str) -> str:
    """A Piper voice as the picker shows it: ``en_US-joe-medium`` → "Joe (en_US, medium)"."""
    parts = name.split("-")
    if len(parts) != 3:
        return f"{name} ({language})" if language else name
    locale, speaker, quality = parts
    return f"{speaker.replace('_', ' ').title()} ({language or locale}, {quality})"
