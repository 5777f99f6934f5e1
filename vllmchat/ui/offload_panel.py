"""The n_gpu_layers slider with live estimates, and the memory panel."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.models.advisor import check_fit
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings, estimate
from vllmchat.core.tuning.results import TuneResult
from vllmchat.ui.slider_marks import SliderMarks


def _mib(n: float) -> str:
    return f"{n / MIB:,.0f} MiB" if n < 10 * 1024 * MIB else f"{n / 2**30:,.1f} GiB"


class OffloadPanel(QGroupBox):
    """Drag to see the estimated memory; release to reload the model live."""

    reload_requested = Signal(int)
    """Reload with this many GPU layers (debounced, on release)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("GPU offload", parent)
        layout = QVBoxLayout(self)
        self.heading = QLabel("GPU layers: –")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setEnabled(False)
        self.estimate = QLabel("")
        self.estimate.setWordWrap(True)
        self.reason = QLabel("")
        self.reason.setWordWrap(True)
        self.reason.setStyleSheet("color: #a60;")
        self.measured = QLabel("")
        self.measured.setWordWrap(True)
        self.tick_marks = SliderMarks(self.slider)
        self.marks = QLabel("")
        self.marks.setWordWrap(True)
        self.marks.setAccessibleName("Measured speed by GPU layers")
        self.tune_button = QPushButton("Tune…")
        self.tune_button.setToolTip("Measure GPU layers and threads on this machine")
        widgets = (self.heading, self.slider, self.tick_marks, self.marks, self.estimate,
                   self.reason, self.measured, self.tune_button)  # fmt: skip
        for w in widgets:
            layout.addWidget(w)
        self.desc: ModelDescription | None = None
        self.hw: HardwareInfo | None = None
        self.fit_settings = FitSettings()
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(350)
        self._debounce.timeout.connect(self._emit_reload)
        self.slider.valueChanged.connect(self._on_value)
        self.slider.sliderReleased.connect(self._debounce.start)
        self._loaded_value = 0

    def set_model(
        self, desc: ModelDescription, hw: HardwareInfo, settings: FitSettings, n_gpu_layers: int
    ) -> None:
        self.desc, self.hw, self.fit_settings = desc, hw, settings
        self.tune_button.setEnabled(True)
        self.slider.blockSignals(True)
        self.slider.setRange(0, desc.n_layer + 1)
        self.slider.setValue(min(n_gpu_layers, desc.n_layer + 1))
        self.slider.blockSignals(False)
        self._loaded_value = self.slider.value()
        self.slider.setEnabled(hw.gpu_offload)
        self.reason.setText("" if hw.gpu_offload else f"Offload unavailable: {hw.offload_reason}")
        self._show_estimate(self.slider.value())

    def set_busy(self, busy: bool) -> None:
        self.slider.setEnabled(not busy and bool(self.hw and self.hw.gpu_offload))

    def _on_value(self, value: int) -> None:
        self._show_estimate(value)
        if not self.slider.isSliderDown():
            self._debounce.start()  # keyboard and wheel changes

    def _show_estimate(self, value: int) -> None:
        if self.desc is None or self.hw is None:
            return
        n = self.desc.n_layer
        self.heading.setText(f"GPU layers: {value} of {n + 1}" + (" (all)" if value > n else ""))
        s = replace(self.fit_settings, n_gpu_layers=value, gpu=self.hw.gpu_offload)
        e = estimate(self.desc, s)
        fit = check_fit(self.desc, self.hw, s)
        color = "#080" if fit.fits else "#c00"
        self.estimate.setText(
            f"Estimated: VRAM {_mib(e.vram)} of {_mib(self.hw.vram_free)} free · "
            f"RAM {_mib(e.ram)}<br><span style='color:{color}'>{fit.message}</span>"
        )

    def _emit_reload(self) -> None:
        if self.slider.value() != self._loaded_value:
            self._loaded_value = self.slider.value()
            self.reload_requested.emit(self.slider.value())

    def show_remote(self, reason: str) -> None:
        """A model on a server: say why the slider, estimate and tuner do not apply."""
        self.desc = None
        self.slider.setEnabled(False)
        self.tune_button.setEnabled(False)
        self.heading.setText("GPU layers: set on the server")
        self.estimate.setText("")
        self.marks.setText("")
        self.tick_marks.set_marks({}, None)
        self.measured.setText("")
        self.reason.setText(reason)

    def show_tuning(self, result: TuneResult) -> None:
        """Measured marks under the slider: decode tok/s at each measured layer count."""
        best: dict[int, float] = {}
        for p in result.points:
            if p.fits:
                n = p.config.n_gpu_layers
                best[n] = max(best.get(n, 0.0), p.decode_tok_s)
        pick = result.pick.n_gpu_layers if result.pick else None
        marks = [
            f"<b>{n}: {v:.0f}</b>" if n == pick else f"{n}: {v:.0f}"
            for n, v in sorted(best.items())
        ]
        self.marks.setText("Measured tok/s by layers — " + " · ".join(marks) if marks else "")
        self.tick_marks.set_marks(best, pick)
        self.marks.setToolTip(result.reason)

    def show_measured(self, buffers_mib: dict[str, float], tok_s: float | None) -> None:
        gpu = sum(v for k, v in buffers_mib.items() if "CPU" not in k.split(":")[1])
        cpu = sum(buffers_mib.values()) - gpu
        speed = f" · {tok_s:.1f} tok/s" if tok_s else ""
        self.measured.setText(f"Measured: GPU {gpu:,.0f} MiB · CPU {cpu:,.0f} MiB{speed}")


class MemoryPanel(QGroupBox):
    """RAM and VRAM in use, the KV cache, and the weights / KV / compute split."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Memory", parent)
        form = QFormLayout(self)
        self.ram = QLabel("–")
        self.vram = QLabel("–")
        self.kv = QLabel("–")
        self.split = QLabel("–")
        self.split.setWordWrap(True)
        self.advice = QLabel("")
        self.advice.setWordWrap(True)
        self.advice.setStyleSheet("color: #c00;")
        form.addRow("Engine RAM", self.ram)
        form.addRow("VRAM", self.vram)
        form.addRow("KV cache", self.kv)
        form.addRow("Split", self.split)
        form.addRow(self.advice)

    def update_usage(
        self,
        *,
        rss: int | None,
        buffers_mib: dict[str, float],
        vram_process: int | None = None,
        kv_tokens: int,
        n_ctx: int,
        kv_bytes_per_token: float,
    ) -> None:
        self.ram.setText(_mib(rss) if rss else "–")
        gpu = {k: v for k, v in buffers_mib.items() if "CPU" not in k.split(":")[1]}
        buffers = f"{sum(gpu.values()):,.0f} MiB llama.cpp buffers"
        if vram_process is not None:
            self.vram.setText(f"{_mib(vram_process)} in use by the engine · {buffers}")
        else:
            self.vram.setText(buffers if gpu else "none (CPU only)")
        self.kv.setText(
            f"{kv_tokens:,} of {n_ctx:,} tokens · {_mib(kv_tokens * kv_bytes_per_token)}"
        )
        parts = {"weights": 0.0, "KV": 0.0, "compute": 0.0}
        for key, mib in buffers_mib.items():
            kind = key.split(":")[0]
            parts["weights" if kind == "model" else "KV" if kind == "kv" else "compute"] += mib
        self.split.setText(" · ".join(f"{k} {v:,.0f} MiB" for k, v in parts.items()))

    def show_remote(self) -> None:
        """A model on a server: its memory is the server's, not this machine's."""
        text = "on the server (it owns the model's memory)"
        for label in (self.ram, self.vram, self.split):
            label.setText(text)

    def show_error(self, kind: str, message: str) -> None:
        if kind == "oom_load":
            head = (
                "Out of memory while loading the weights: lower GPU layers or pick a smaller quant."
            )
        elif kind in ("oom_generate", "context_full"):
            head = (
                "Out of memory or context while generating: shorten the context, use a "
                "q8_0 KV cache, or let older turns be summarized."
            )
        else:
            head = ""
        self.advice.setText(f"{head}\n{message}".strip())

    def clear_error(self) -> None:
        self.advice.setText("")
