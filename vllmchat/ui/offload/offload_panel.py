"""The offload controls with live estimates: GPU layers, and for a mixture of
experts the layers whose experts are on the GPU too.

The panel holds no settings of its own and estimates nothing: it shows the placement
the application layer announced (``follow``, under a signal blocker: no echo), says
which placement it shows (``placement_shown``, on every change), shows the estimate
the application layer answers with (``show_proposal``: the fit, and the positions
at or past the estimate's bound marked red under each slider) and asks for a new
placement on release (``placement_requested``).
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.app.events import PlacementProposed, SliderBounds
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.models.memory import MIB, FitSettings
from vllmchat.core.placement import Placement, all_layers
from vllmchat.core.tuning.results import TuneResult
from vllmchat.ui.offload.slider_marks import SliderMarks


def _mib(n: float) -> str:
    return f"{n / MIB:,.0f} MiB" if n < 10 * 1024 * MIB else f"{n / 2**30:,.1f} GiB"


class OffloadPanel(QGroupBox):
    """Drag to see the estimated memory; release to reload the model live."""

    placement_requested = Signal(object)
    """``Placement``: the user placed the weights anew (debounced, on release)."""
    placement_shown = Signal(object)
    """``Placement``: the sliders show this placement now; its estimate is wanted
    (``show_proposal`` shows it)."""

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
        self.expert_heading = QLabel("")
        self.expert_slider = QSlider(Qt.Orientation.Horizontal)
        self.expert_slider.setAccessibleName("Expert layers on the GPU")
        self.expert_slider.setToolTip(
            "A mixture of experts: every layer's attention stays on the GPU; the experts of "
            "the other layers are read from RAM by the CPU."
        )
        self.expert_marks = SliderMarks(self.expert_slider)
        self.expert_note = QLabel("")
        self.expert_note.setWordWrap(True)
        self.tune_button = QPushButton("Tune…")
        self.tune_button.setToolTip("Measure GPU layers and threads on this machine")
        widgets = (
            self.heading,
            self.slider,
            self.tick_marks,
            self.expert_heading,
            self.expert_slider,
            self.expert_marks,
            self.expert_note,
            self.marks,
            self.estimate,
            self.reason,
            self.measured,
            self.tune_button,
        )
        for w in widgets:
            layout.addWidget(w)
        self.desc: ModelDescription | None = None
        self.hw: HardwareInfo | None = None
        self.fit_settings = FitSettings()
        self.proposal: PlacementProposed | None = None  # the estimate shown
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(350)
        self._debounce.timeout.connect(self._request)
        self.slider.valueChanged.connect(self._on_value)
        self.slider.sliderReleased.connect(self._debounce.start)
        self.expert_slider.valueChanged.connect(self._on_value)
        self.expert_slider.sliderReleased.connect(self._debounce.start)
        self._show_experts(False, "")

    @property
    def moe(self) -> bool:
        """Whether the expert control applies (a mixture of experts llama.cpp can place)."""
        return self.desc is not None and self.desc.is_moe

    def placement(self) -> Placement:
        """The placement the sliders show (the rest as announced)."""
        shown = self.fit_settings.placement
        if self.desc is None:
            return shown
        shown = replace(shown, n_gpu_layers=self.slider.value())
        if not self.moe:
            return shown
        return shown.with_expert_layers_on_gpu(self.expert_slider.value(), self.desc.n_layer)

    def set_model(self, desc: ModelDescription, hw: HardwareInfo, settings: FitSettings) -> None:
        """A model loaded: its layers, the machine as a new placement finds it, and the
        settings it runs with (its placement among them)."""
        self.desc, self.hw = desc, hw
        self.tune_button.setEnabled(True)
        tops = ((self.slider, all_layers(desc.n_layer)), (self.expert_slider, desc.n_layer))
        for slider, top in tops:
            blocker = QSignalBlocker(slider)
            slider.setRange(0, top)
            blocker.unblock()
        self._show_experts(desc.is_moe, desc.moe_unplaceable_reason)
        self.set_busy(False)
        self.reason.setText("" if hw.gpu_offload else f"Offload unavailable: {hw.offload_reason}")
        self.follow(settings)

    def follow(self, settings: FitSettings) -> None:
        """Show the settings the application layer runs with (no request goes out)."""
        self._debounce.stop()
        self.fit_settings = settings
        if self.desc is None:
            return
        placement = settings.placement
        for slider, value in (
            (self.slider, placement.n_gpu_layers),
            (self.expert_slider, placement.expert_layers_on_gpu(self.desc.n_layer)),
        ):
            blocker = QSignalBlocker(slider)
            slider.setValue(max(0, min(value, slider.maximum())))
            blocker.unblock()
        self._shown()

    def past_bound(self, placement: Placement) -> str:
        """Why ``placement`` is at or past the estimate's bound, as the estimate shown
        says ("" when it fits, or when it is not the placement shown)."""
        p = self.proposal
        return p.past_bound if p is not None and p.placement == placement else ""

    def _show_experts(self, shown: bool, reason: str) -> None:
        for w in (self.expert_heading, self.expert_slider, self.expert_marks):
            w.setVisible(shown)
        self.expert_note.setVisible(bool(reason))
        self.expert_note.setText(reason + (" The expert control is hidden." if reason else ""))

    def set_busy(self, busy: bool) -> None:
        enabled = not busy and bool(self.hw and self.hw.gpu_offload)
        self.slider.setEnabled(enabled)
        self.expert_slider.setEnabled(enabled and self.moe)

    def _on_value(self, _value: int) -> None:
        self._shown()
        if not (self.slider.isSliderDown() or self.expert_slider.isSliderDown()):
            self._debounce.start()  # keyboard and wheel changes

    def _shown(self) -> None:
        """The headings for the sliders' placement, and the wish for its estimate."""
        if self.desc is None or self.hw is None:
            return
        n = self.desc.n_layer
        placement = self.placement()
        layers = placement.n_gpu_layers
        heading = f"GPU layers: {layers} of {all_layers(n)}"
        self.heading.setText(heading + (" (all)" if placement.all_on_gpu(n) else ""))
        if self.moe:
            cpu_moe = placement.n_cpu_moe
            self.expert_heading.setText(
                f"Expert layers on the GPU: {placement.expert_layers_on_gpu(n)} of {n}"
                + (f" (experts of {cpu_moe} layers on the CPU)" if cpu_moe else "")
            )
        self.placement_shown.emit(placement)

    def show_proposal(self, proposal: PlacementProposed) -> None:
        """Show the application layer's estimate of the placement the sliders show (an
        answer for another placement, overtaken by a later move, is left out)."""
        if self.desc is None or proposal.placement != self.placement():
            return
        self.proposal = proposal
        fit, room = proposal.fit, proposal.room
        self._mark_bounds(proposal.bounds if room is not None and room.gpu_offload else None)
        if fit is None or room is None:
            self.estimate.setText("")
            return
        e = fit.estimate
        color = "#080" if fit.fits else "#c00"
        per_gpu = ""
        if len(e.vram_by_device) > 1:
            per_gpu = " (" + " + ".join(_mib(b) for b in e.vram_by_device) + ")"
        used = f"VRAM {_mib(e.vram)}{per_gpu} of {_mib(room.vram_free)} free · RAM {_mib(e.ram)}"
        if room.unified:  # Apple silicon: one pool, the GPU's share capped
            used = (
                f"memory {_mib(e.vram + e.ram)} of {_mib(room.ram_available)} free "
                f"(one pool: GPU {_mib(e.vram)} of at most {_mib(room.gpu_limit)}, "
                f"CPU {_mib(e.ram)})"
            )
        self.estimate.setText(
            f"Estimated: {used}<br><span style='color:{color}'>{fit.message}</span>"
        )

    def _mark_bounds(self, bounds: SliderBounds | None) -> None:
        """Red from the first position of each slider where the estimate does not fit
        (the other slider held where the model runs)."""
        self.tick_marks.set_bound(bounds.layers if bounds else None)
        self.expert_marks.set_bound(bounds.experts if bounds and self.moe else None)

    def _request(self) -> None:
        placement = self.placement()
        if placement != self.fit_settings.placement:
            self.placement_requested.emit(placement)

    def show_remote(self, reason: str) -> None:
        """A model on a server: say why the slider, estimate and tuner do not apply."""
        self.desc = None
        self._show_experts(False, "")
        self.slider.setEnabled(False)
        self.tune_button.setEnabled(False)
        self.heading.setText("GPU layers: set on the server")
        self.estimate.setText("")
        self.marks.setText("")
        self.tick_marks.set_marks({}, None)
        self.measured.setText("")
        self.reason.setText(reason)

    def show_tuning(self, result: TuneResult) -> None:
        """Measured marks under the sliders: decode tok/s at each measured placement
        (whole layers under the first; for a mixture of experts, with every layer
        offloaded, expert layers on the GPU under the second)."""
        n = self.desc.n_layer if self.desc is not None else 0
        layers: dict[int, float] = {}
        experts: dict[int, float] = {}
        under_layers: set[int] = set()  # placements that left less free than the margin
        under_experts: set[int] = set()
        for point in result.points:
            if not point.fits:
                continue
            p, speed = point.config.placement, point.decode_tok_s
            on_gpu = p.expert_layers_on_gpu(n)
            all_on_gpu = p.all_on_gpu(n)
            if p.n_cpu_moe and all_on_gpu:
                experts[on_gpu] = max(experts.get(on_gpu, 0.0), speed)
                if point.under_margin:
                    under_experts.add(on_gpu)
            elif not p.n_cpu_moe:
                layers[p.n_gpu_layers] = max(layers.get(p.n_gpu_layers, 0.0), speed)
                if all_on_gpu:
                    experts[n] = max(experts.get(n, 0.0), speed)
                if point.under_margin:
                    under_layers.add(p.n_gpu_layers)
                    if all_on_gpu:
                        under_experts.add(n)
        pick = result.pick.placement if result.pick is not None else None
        pick_layers = pick.n_gpu_layers if pick and not pick.n_cpu_moe else None
        pick_experts = pick.expert_layers_on_gpu(n) if pick and pick.all_on_gpu(n) else None
        text = []
        rows = (
            ("layers", layers, pick_layers, under_layers),
            ("expert layers on the GPU", experts, pick_experts, under_experts),
        )
        for title, marks, chosen, under in rows:
            if marks and (title == "layers" or self.moe):
                items = [
                    f"<b>{k}: {v:.0f}</b>"
                    if k == chosen
                    else f"<span style='color:#c00'>{k}: {v:.0f} (under the margin)</span>"
                    if k in under
                    else f"{k}: {v:.0f}"
                    for k, v in sorted(marks.items())
                ]
                text.append(f"Measured tok/s by {title} — " + " · ".join(items))
        self.marks.setText("<br>".join(text))
        self.tick_marks.set_marks(layers, pick_layers, under_layers)
        self.expert_marks.set_marks(experts if self.moe else {}, pick_experts, under_experts)
        self.marks.setToolTip(result.reason)

    def show_measured(self, buffers_mib: dict[str, float], tok_s: float | None) -> None:
        gpu = sum(v for k, v in buffers_mib.items() if "CPU" not in k.split(":")[1])
        cpu = sum(buffers_mib.values()) - gpu
        speed = f" · {tok_s:.1f} tok/s" if tok_s else ""
        self.measured.setText(f"Measured: GPU {gpu:,.0f} MiB · CPU {cpu:,.0f} MiB{speed}")
