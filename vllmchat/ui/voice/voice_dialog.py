"""Voice settings: the voice and its speed, the language spoken (detected or chosen),
the microphone and the speakers, whether a transcript is sent at once, whether replies
are spoken; the speech model (Whisper ``base``, or a larger one that mishears less);
"Test voice" speaks a sentence with what is picked, before it is kept. Speech models and
more voices are downloaded from here."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.voice.downloads import VoiceDownloads, VoiceModelReady
from vllmchat.ui.voice.model_downloads import ModelDownloads

Choice = tuple[str, str]
"""A value the settings keep and the words the list shows for it."""

LANGUAGES: tuple[Choice, ...] = tuple(
    re.findall(
        r"(\w+):(\w+)",
        "en:English de:German fr:French es:Spanish it:Italian pt:Portuguese nl:Dutch "
        "pl:Polish cs:Czech sv:Swedish da:Danish fi:Finnish no:Norwegian ru:Russian "
        "uk:Ukrainian tr:Turkish el:Greek ar:Arabic he:Hebrew hi:Hindi zh:Chinese "
        "ja:Japanese ko:Korean vi:Vietnamese id:Indonesian",
    )
)
"""Languages Whisper hears well, offered by name; "" (detect) comes first."""
DEFAULT_RECOGNISER = "whisper-base"  # what "" in the settings stands for
SPEED_STEPS = (50, 200)  # the slider's range, in hundredths: 0.5× to 2×
TEST_SENTENCE = "Hello! This is how I will read the replies to you."
FIELDS = (
    "voice_name",
    "voice_speed",
    "voice_language",
    "voice_input_device",
    "voice_output_device",
    "voice_send_at_once",
    "voice_speak_replies",
    "voice_hands_free",
    "voice_recogniser",
)
"""The settings this dialog edits (each with its one default in ``AppSettings``)."""


def _combo(choices: Sequence[Choice], current: str, first: Choice | None) -> QComboBox:
    """A list of ``choices`` (after ``first``), with ``current`` picked; a saved value no
    longer offered (a voice removed, a device unplugged) stays, marked as missing."""
    box = QComboBox()
    for value, label in ((first,) if first else ()) + tuple(choices):
        box.addItem(label, value)
    at = box.findData(current)
    if at < 0:
        box.addItem(f"{current} (not found)", current)
        at = box.count() - 1
    box.setCurrentIndex(at)
    return box


class VoiceDialog(QDialog):
    """Edits the voice settings; ``changes()`` are those the user changed, by field name."""

    test_requested = Signal(str, str, float)
    """Speak ``TEST_SENTENCE`` (the text, the voice's name, the speed) before keeping them."""
    models_changed = Signal()
    """A model was downloaded: what the voice can do here may have changed."""

    def __init__(
        self,
        settings: Any,
        *,
        voices: Sequence[Choice],
        inputs: Sequence[Choice],
        outputs: Sequence[Choice],
        problems: Sequence[str] = (),
        recognisers: Sequence[str] = (),
        downloads: VoiceDownloads | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """``settings``: the app's settings (their ``voice_*`` fields); ``voices``, ``inputs``
        and ``outputs``: what is installed and plugged in; ``problems``: what keeps the voice
        from working here, each in one line with what to install; ``recognisers``: the
        speech models installed; ``downloads``: where models come from (the hub)."""
        super().__init__(parent)
        self.setWindowTitle("Voice")
        self.original = {name: getattr(settings, name) for name in FIELDS}
        column = QVBoxLayout(self)
        self.problems = QLabel("\n".join(problems))
        self.problems.setWordWrap(True)
        self.problems.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problems.setStyleSheet("color: #b3261e;")
        self.problems.setVisible(bool(problems))
        column.addWidget(self.problems)
        form = QFormLayout()
        column.addLayout(form)
        o = self.original
        self.voice = _combo(voices, o["voice_name"], ("", "The first installed voice"))
        test = QPushButton("Test voice")
        test.clicked.connect(self._test)
        self.test_button = test
        voice_row = QHBoxLayout()
        voice_row.addWidget(self.voice, 1)
        voice_row.addWidget(test)
        form.addRow("Voice", voice_row)
        self.speed = QSlider(Qt.Orientation.Horizontal)
        self.speed.setRange(*SPEED_STEPS)
        self.speed.setSingleStep(5)
        self.speed.setPageStep(25)
        self.speed.setValue(round(float(o["voice_speed"]) * 100))
        self.speed_label = QLabel()
        self.speed.valueChanged.connect(self._show_speed)
        self._show_speed(self.speed.value())
        speed_row = QHBoxLayout()
        speed_row.addWidget(self.speed, 1)
        speed_row.addWidget(self.speed_label)
        form.addRow("Speed", speed_row)
        self.language = _combo(LANGUAGES, o["voice_language"], ("", "Detect"))
        form.addRow("Language spoken", self.language)
        others = [(n, n) for n in recognisers if n != DEFAULT_RECOGNISER]
        self.recogniser = _combo(
            others, o["voice_recogniser"], ("", f"{DEFAULT_RECOGNISER} (fastest)")
        )
        form.addRow("Speech model", self.recogniser)
        self.input = _combo(inputs, o["voice_input_device"], ("", "System default"))
        form.addRow("Microphone", self.input)
        self.output = _combo(outputs, o["voice_output_device"], ("", "System default"))
        form.addRow("Speakers", self.output)
        self.send_at_once = QCheckBox("Send what I said at once (else it waits in the box)")
        self.send_at_once.setChecked(bool(o["voice_send_at_once"]))
        self.speak_replies = QCheckBox("Speak replies as they stream")
        self.speak_replies.setChecked(bool(o["voice_speak_replies"]))
        self.hands_free = QCheckBox(
            "Hands-free: end at silence, send, and listen again after the reply"
        )
        self.hands_free.setChecked(bool(o["voice_hands_free"]))
        for box in (self.send_at_once, self.speak_replies, self.hands_free):
            form.addRow("", box)
        group = QGroupBox("Download speech models or more voices")
        inside = QVBoxLayout(group)
        self.models = ModelDownloads(downloads)
        self.models.model_ready.connect(self._model_ready)
        inside.addWidget(self.models)
        column.addWidget(group)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        column.addWidget(buttons)

    def _model_ready(self, event: VoiceModelReady) -> None:
        if event.kind == "piper" and self.voice.findData(event.name) < 0:
            self.voice.addItem(event.name, event.name)
        known = self.recogniser.findData(event.name) >= 0 or event.name == DEFAULT_RECOGNISER
        if event.kind == "whisper" and not known:
            self.recogniser.addItem(event.name, event.name)
        self.models_changed.emit()

    def done(self, result: int) -> None:
        """Closed: a download under way stops (its bytes are kept for the next time)."""
        self.models.close_downloads()
        super().done(result)

    def _show_speed(self, value: int) -> None:
        self.speed_label.setText(f"{value / 100:.2f}×")

    def _test(self) -> None:
        self.test_requested.emit(TEST_SENTENCE, self.voice.currentData(), self.speed.value() / 100)

    def values(self) -> dict[str, Any]:
        """Every voice setting as the dialog shows it."""
        return {
            "voice_name": self.voice.currentData(),
            "voice_speed": round(self.speed.value() / 100, 2),
            "voice_language": self.language.currentData(),
            "voice_input_device": self.input.currentData(),
            "voice_output_device": self.output.currentData(),
            "voice_send_at_once": self.send_at_once.isChecked(),
            "voice_speak_replies": self.speak_replies.isChecked(),
            "voice_hands_free": self.hands_free.isChecked(),
            "voice_recogniser": self.recogniser.currentData(),
        }

    def changes(self) -> dict[str, Any]:
        """The settings the user changed (none when Cancel was pressed)."""
        if self.result() != QDialog.DialogCode.Accepted:
            return {}
        return {k: v for k, v in self.values().items() if v != self.original[k]}
