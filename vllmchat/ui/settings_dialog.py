"""Settings: sampling, system prompt presets, context policy, and model settings."""

from __future__ import annotations

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
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app_settings import AppSettings


def _spin(lo: int, hi: int, value: int, step: int = 1) -> QSpinBox:
    w = QSpinBox()
    w.setRange(lo, hi)
    w.setSingleStep(step)
    w.setValue(value)
    return w


def _dspin(lo: float, hi: float, value: float, step: float) -> QDoubleSpinBox:
    w = QDoubleSpinBox()
    w.setRange(lo, hi)
    w.setSingleStep(step)
    w.setDecimals(2)
    w.setValue(value)
    return w


class SettingsDialog(QDialog):
    """Edits a copy of the settings; ``result_settings()`` gives the new ones."""

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.original = settings
        s = settings
        layout = QHBoxLayout()
        sampling = QGroupBox("Sampling")
        f = QFormLayout(sampling)
        self.temperature = _dspin(0, 2, s.temperature, 0.05)
        self.top_p = _dspin(0, 1, s.top_p, 0.01)
        self.top_k = _spin(0, 1000, s.top_k)
        self.min_p = _dspin(0, 1, s.min_p, 0.01)
        self.repeat_penalty = _dspin(0.5, 2, s.repeat_penalty, 0.01)
        self.max_tokens = _spin(16, 32768, s.max_tokens, 64)
        self.seed = _spin(-1, 2**31 - 1, s.seed)
        w: QWidget
        for label, w in (
            ("Temperature", self.temperature),
            ("Top-p", self.top_p),
            ("Top-k", self.top_k),
            ("Min-p", self.min_p),
            ("Repeat penalty", self.repeat_penalty),
            ("Max tokens", self.max_tokens),
            ("Seed (-1 random)", self.seed),
        ):
            f.addRow(label, w)
        context = QGroupBox("History")
        f = QFormLayout(context)
        self.policy = QComboBox()
        self.policy.addItems(["summarize", "keep_last", "ask"])
        self.policy.setCurrentText(s.policy)
        self.threshold = _dspin(0.3, 0.95, s.summarize_threshold, 0.05)
        self.every = _spin(0, 100, s.summarize_every)
        self.keep = _spin(1, 50, s.keep_last_turns)
        f.addRow("When full", self.policy)
        f.addRow("Summarize at (share of context)", self.threshold)
        f.addRow("Also every K turns (0 off)", self.every)
        f.addRow("Keep last N turns", self.keep)
        model = QGroupBox("Model (changes reload it)")
        f = QFormLayout(model)
        self.n_ctx = _spin(256, 262144, s.n_ctx, 256)
        self.threads = _spin(1, 256, s.n_threads)
        self.type_k = QComboBox()
        self.type_v = QComboBox()
        for combo, value in ((self.type_k, s.type_k), (self.type_v, s.type_v)):
            combo.addItems(["f16", "q8_0", "q4_0"])
            combo.setCurrentText(value)
        self.flash = QCheckBox("Flash attention")
        self.flash.setChecked(s.flash_attn)
        for label, w in (
            ("Context size", self.n_ctx),
            ("Threads", self.threads),
            ("K cache type", self.type_k),
            ("V cache type", self.type_v),
            ("", self.flash),
        ):
            f.addRow(label, w)
        self.note = QLabel("")
        self.note.setStyleSheet("color: #a60;")
        f.addRow(self.note)
        left = QVBoxLayout()
        left.addWidget(sampling)
        left.addWidget(context)
        layout.addLayout(left)
        right = QVBoxLayout()
        right.addWidget(model)
        system = QGroupBox("System prompt")
        v = QVBoxLayout(system)
        self.preset = QComboBox()
        self.preset.addItem("(custom)")
        self.preset.addItems(list(s.presets))
        self.preset.currentTextChanged.connect(self._use_preset)
        self.system = QPlainTextEdit(s.system_prompt)
        v.addWidget(self.preset)
        v.addWidget(self.system)
        right.addWidget(system)
        layout.addLayout(right)
        outer = QVBoxLayout(self)
        outer.addLayout(layout)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        outer.addWidget(buttons)
        for w in (self.n_ctx, self.threads):
            w.valueChanged.connect(self._update_note)
        for c in (self.type_k, self.type_v):
            c.currentTextChanged.connect(self._update_note)
        self.flash.toggled.connect(self._update_note)

    def _use_preset(self, name: str) -> None:
        if name in self.original.presets:
            self.system.setPlainText(self.original.presets[name])

    def _update_note(self) -> None:
        changed = self.result_settings().needs_reload(self.original)
        self.note.setText("The model will reload (the conversation is kept)." if changed else "")

    def _accept(self) -> None:
        s = self.result_settings()
        if s.type_v != "f16" and not s.flash_attn:
            self.note.setText("A quantized V cache needs flash attention.")
            return
        self.accept()

    def result_settings(self) -> AppSettings:
        return self.original.with_changes(
            temperature=self.temperature.value(),
            top_p=self.top_p.value(),
            top_k=self.top_k.value(),
            min_p=self.min_p.value(),
            repeat_penalty=self.repeat_penalty.value(),
            max_tokens=self.max_tokens.value(),
            seed=self.seed.value(),
            policy=self.policy.currentText(),
            summarize_threshold=self.threshold.value(),
            summarize_every=self.every.value(),
            keep_last_turns=self.keep.value(),
            n_ctx=self.n_ctx.value(),
            n_threads=self.threads.value(),
            type_k=self.type_k.currentText(),
            type_v=self.type_v.currentText(),
            flash_attn=self.flash.isChecked(),
            system_prompt=self.system.toPlainText(),
        )
