"""The voice's controls beside the message box: the mic button (hold to talk, or click
to start and click again to stop), the level meter while it records, and the
hands-free and speak-replies toggles."""

from __future__ import annotations

import math
import time
from enum import Enum

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QAction, QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QSizePolicy, QToolButton, QWidget

from vllmchat.ui.common.theme import ThemeWatcher
from vllmchat.ui.voice.glyphs import RECORDING, WRITING, glyph

HOLD_S = 0.35
"""A press held this long is push-to-talk: the release ends the turn. A shorter one is
a click: the recording goes on until the next click."""
ICON_SIDE = 18


class MicState(Enum):
    """What the microphone is doing, as the button shows it."""

    IDLE = "idle"
    LISTENING = "listening"  # recording; partial text shows in the box
    HEARING = "hearing"  # the speech ended; the transcript is on its way


TIPS = {
    MicState.IDLE: "Talk: hold to speak, or click to start and click again to stop",
    MicState.LISTENING: "Listening… release (or click) to end, Esc drops the recording",
    MicState.HEARING: "Writing down what you said…",
}


class MicButton(QToolButton):
    """Press to start talking; a held press ends at its release, a click at the next
    press. It asks (``talk_started``, ``talk_ended``); the owner sets its ``state``."""

    talk_started = Signal()
    """The user pressed the button to speak (it also stops any speaking)."""
    talk_ended = Signal()
    """The user is done: the push-to-talk key released, or the second click."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = MicState.IDLE
        self._pressed_at: float | None = None
        self.setIconSize(QSize(ICON_SIDE, ICON_SIDE))
        self.setAccessibleName("Talk")
        self.setAutoRaise(False)
        self.pressed.connect(self._on_pressed)
        self.released.connect(self._on_released)
        self.set_state(MicState.IDLE)

    def set_state(self, state: MicState) -> None:
        self.state = state
        color = {MicState.LISTENING: RECORDING, MicState.HEARING: WRITING}.get(state)
        self.setIcon(glyph("mic", color=color, filled=color is not None))
        self.setToolTip(TIPS[state])

    def refresh_icon(self) -> None:
        """Redraw in the scheme's colours (after a light/dark switch)."""
        self.set_state(self.state)

    def _on_pressed(self) -> None:
        if self.state is MicState.IDLE:
            self._pressed_at = time.monotonic()
            self.talk_started.emit()
        else:  # the second click of click-to-talk (or a press while it transcribes)
            self._pressed_at = None
            if self.state is MicState.LISTENING:
                self.talk_ended.emit()

    def _on_released(self) -> None:
        pressed_at, self._pressed_at = self._pressed_at, None
        if pressed_at is None or self.state is not MicState.LISTENING:
            return
        if time.monotonic() - pressed_at >= HOLD_S:
            self.talk_ended.emit()


FLOOR_DB = -60.0  # the meter's empty end; full scale (0 dBFS) is its top


def meter_fill(level: float) -> float:
    """How full the meter is for an RMS ``level`` (0..1): decibels, -60 dBFS to 0."""
    if level <= 0:
        return 0.0
    return max(0.0, min(1.0, 1 - 20 * math.log10(level) / FLOOR_DB))


class LevelMeter(QWidget):
    """The microphone's level while it records: a thin bar filled in decibels, so that
    quiet speech moves it as loud speech does."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.level = 0.0
        self.setFixedWidth(6)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)
        self.setToolTip("The microphone's level")
        self.setAccessibleName("Microphone level")

    def set_level(self, level: float) -> None:
        self.level = max(0.0, min(1.0, level))
        self.update()

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.rect()
        painter.fillRect(rect, self.palette().color(QPalette.ColorRole.Mid))
        height = round(rect.height() * meter_fill(self.level))
        if height:
            color = QColor(RECORDING) if self.level > 0.7 else QColor("#1e8e3e")
            painter.fillRect(rect.adjusted(0, rect.height() - height, 0, 0), color)
        painter.end()


class VoiceControls(QWidget):
    """The mic, its meter, and the hands-free and speak-replies toggles, in a row; the
    toggles are actions, which the Voice menu shows too."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        self.mic = MicButton()
        self.meter = LevelMeter()
        self.meter.hide()  # while recording
        self.hands_free = self._toggle(
            "hands-free",
            "Hands-free",
            "a turn ends when you stop speaking and is sent; the mic listens again once "
            "the reply has been spoken",
        )
        self.speak_replies = self._toggle(
            "speaker", "Speak replies", "each reply is read aloud, sentence by sentence"
        )
        row.addWidget(self.mic)
        row.addWidget(self.meter)
        for action in (self.hands_free, self.speak_replies):
            button = QToolButton()
            button.setDefaultAction(action)
            button.setIconSize(QSize(ICON_SIDE, ICON_SIDE))
            button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
            row.addWidget(button)
        self.theme = ThemeWatcher(self)
        self.theme.changed.connect(self._on_scheme)

    def _toggle(self, name: str, label: str, tip: str) -> QAction:
        action = QAction(glyph(name), label, self)
        action.setCheckable(True)
        action.setToolTip(f"{label}: {tip}")
        action.setObjectName(name)
        return action

    def show_settings(self, *, hands_free: bool, speak_replies: bool) -> None:
        """Show the settings' values without echoing them back as the user's changes."""
        for action, on in ((self.hands_free, hands_free), (self.speak_replies, speak_replies)):
            if action.isChecked() != on:
                action.blockSignals(True)
                action.setChecked(on)
                action.blockSignals(False)

    def set_state(self, state: MicState) -> None:
        self.mic.set_state(state)
        self.meter.setVisible(state is MicState.LISTENING)
        if state is not MicState.LISTENING:
            self.meter.set_level(0.0)

    def _on_scheme(self, dark: bool) -> None:
        self.hands_free.setIcon(glyph("hands-free", dark))
        self.speak_replies.setIcon(glyph("speaker", dark))
        self.mic.refresh_icon()
