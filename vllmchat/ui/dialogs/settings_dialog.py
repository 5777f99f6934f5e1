"""Settings: sampling, history, model settings and the system prompt, with an editor
per field built from the settings' own fields (as the terminal's options are), and
combinations that do not hold shown at once, with OK disabled until they do."""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.ui.models.draft_field import DraftField

# Load settings the offload panel and the model picker own (not edited here).
PLACED_ELSEWHERE = ("model_path", "placement")  # the model picker, the offload panel
NOT_SHOWN = ("ignore_eos",)  # benchmarks only
FLOAT_STEPS = {"temperature": 0.05, "threshold": 0.05}
LABELS = {
    "top_p": "Top-p",
    "top_k": "Top-k",
    "min_p": "Min-p",
    "seed": "Seed (-1 random)",
    "mode": "When full",
    "threshold": "Summarize at (share of context)",
    "every_k_turns": "Also every K turns (0 off)",
    "keep_last_turns": "Keep last N turns",
    "n_ctx": "Context size",
    "n_threads": "Threads",
    "n_threads_batch": "Prompt threads (0 same)",
    "n_batch": "Batch",
    "n_ubatch": "Micro-batch",
    "flash_attn": "Flash attention",
    "type_k": "K cache type",
    "type_v": "V cache type",
    "use_mmap": "Map the model file",
    "swa_full": "Full sliding-window cache",
    "draft_model": "Draft model",
    "draft_n_gpu_layers": "Draft model's GPU layers",
    "mmproj_path": "Projector (mmproj)",
}


def _editor(kind: Any, value: Any) -> QWidget:
    """An editor for a field of this type, holding ``value``."""
    if kind is bool:
        box = QCheckBox()
        box.setChecked(bool(value))
        return box
    if typing.get_origin(kind) is typing.Literal:
        combo = QComboBox()
        combo.addItems([str(c) for c in typing.get_args(kind)])
        combo.setCurrentText(str(value))
        return combo
    if kind is int:
        spin = QSpinBox()
        spin.setRange(-1, 2**31 - 1)
        spin.setValue(int(value))
        return spin
    if kind is float:
        dspin = QDoubleSpinBox()
        dspin.setRange(0.0, 100.0)
        dspin.setDecimals(2)
        dspin.setSingleStep(0.01)
        dspin.setValue(float(value))
        return dspin
    line = QLineEdit(str(value))
    return line


def _value(editor: QWidget) -> Any:
    if isinstance(editor, QCheckBox):
        return editor.isChecked()
    if isinstance(editor, QComboBox):
        return editor.currentText()
    if isinstance(editor, QSpinBox | QDoubleSpinBox):
        return editor.value()
    assert isinstance(editor, QLineEdit)
    return editor.text()


def _changed_signal(editor: QWidget) -> Any:
    if isinstance(editor, QCheckBox):
        return editor.toggled
    if isinstance(editor, QComboBox):
        return editor.currentTextChanged
    if isinstance(editor, QSpinBox | QDoubleSpinBox):
        return editor.valueChanged
    assert isinstance(editor, QLineEdit)
    return editor.textChanged


class SettingsDialog(QDialog):
    """Edits a copy of the settings; ``result_settings()`` gives the new ones (None while
    the combination does not hold; ``problem`` then says why)."""

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.original = settings
        self.editors: dict[str, QWidget] = {}
        self.problem = ""
        groups = (
            ("Sampling", SamplingSettings, settings.sampler, ()),
            ("History", ContextPolicy, settings.history, ()),
            ("Model (changes reload it)", LoadSettings, settings.load, PLACED_ELSEWHERE),
        )
        boxes = []
        for title, cls, current, skip in groups:
            box = QGroupBox(title)
            form = QFormLayout(box)
            hints = typing.get_type_hints(cls)
            for f in fields(cls):
                if f.name in skip or f.name in NOT_SHOWN:
                    continue
                editor = _editor(hints[f.name], getattr(current, f.name))
                shown: QWidget = editor
                if f.name == "draft_model":  # a list of the models that can draft
                    shown = self.drafts = DraftField(
                        settings.load.model_path, settings.load.draft_model
                    )
                    editor = self.drafts.combo
                if isinstance(editor, QDoubleSpinBox):
                    editor.setSingleStep(FLOAT_STEPS.get(f.name, 0.01))
                help_text = f.metadata.get("help", "")
                editor.setToolTip(help_text)
                editor.setAccessibleName(f.name)
                _changed_signal(editor).connect(self._update)
                form.addRow(LABELS.get(f.name, f.name.replace("_", " ").capitalize()), shown)
                self.editors[f.name] = editor
            boxes.append((box, form))
        embedding = QLineEdit(settings.embedding_model)
        embedding.setAccessibleName("embedding_model")
        embedding.setPlaceholderText("none: passages by FTS5 alone")
        embedding.setToolTip(
            "An embedding GGUF: a large document's passages are ranked by "
            "FTS5 and by embeddings, fused (reciprocal rank)."
        )
        embedding.textChanged.connect(self._update)
        boxes[1][1].addRow("Embedding model (GGUF)", embedding)
        self.editors["embedding_model"] = embedding
        self.note = QLabel("")
        self.note.setWordWrap(True)
        boxes[2][1].addRow(self.note)
        layout = QHBoxLayout()
        left = QVBoxLayout()
        left.addWidget(boxes[0][0])
        left.addWidget(boxes[1][0])
        layout.addLayout(left)
        right = QVBoxLayout()
        right.addWidget(boxes[2][0])
        system = QGroupBox("System prompt")
        v = QVBoxLayout(system)
        self.preset = QComboBox()
        self.preset.addItem("(custom)")
        self.preset.addItems(list(settings.presets))
        self.preset.currentTextChanged.connect(self._use_preset)
        self.system = QPlainTextEdit(settings.system_prompt)
        v.addWidget(self.preset)
        v.addWidget(self.system)
        right.addWidget(system)
        layout.addLayout(right)
        outer = QVBoxLayout(self)
        outer.addLayout(layout)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        outer.addWidget(self.buttons)
        self._update()

    def _use_preset(self, name: str) -> None:
        if name in self.original.presets:
            self.system.setPlainText(self.original.presets[name])

    def _update(self) -> None:
        """Check the combination as it stands: the reason inline, OK disabled with it."""
        new = self.result_settings()
        if new is None:
            self.note.setStyleSheet("color: #c00;")
            self.note.setText(self.problem)
            self.ok.setEnabled(False)
            self.ok.setToolTip(f"Not until this is fixed: {self.problem}")
            return
        self.note.setStyleSheet("color: #a60;")
        reload = new.needs_reload(self.original)
        self.note.setText("The model will reload (the conversation is kept)." if reload else "")
        self.ok.setEnabled(True)
        self.ok.setToolTip("")

    def done(self, result: int) -> None:
        self.drafts.close_workers()  # a search for draft models still running
        super().done(result)

    def _accept(self) -> None:
        if self.result_settings() is not None:
            self.accept()

    def result_settings(self) -> AppSettings | None:
        """The edited settings, or None (and ``problem``) when they do not hold."""
        values = {name: _value(editor) for name, editor in self.editors.items()}
        try:
            new = self.original.with_changes(system_prompt=self.system.toPlainText(), **values)
        except (TypeError, ValueError) as exc:
            text = str(exc)
            self.problem = text[:1].upper() + text[1:]
            return None
        self.problem = ""
        return new
