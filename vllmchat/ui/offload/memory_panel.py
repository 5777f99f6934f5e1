"""The memory panel: RAM and VRAM in use (per GPU), the KV cache, and the weights /
KV / compute split."""

from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QWidget

from vllmchat.ui.offload.offload_panel import _mib


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
        devices: dict[str, float] = {}
        for key, mib in gpu.items():  # "model:CUDA0" -> CUDA0
            devices[key.split(":")[1]] = devices.get(key.split(":")[1], 0.0) + mib
        if len(devices) > 1:  # each GPU's share
            buffers += " (" + ", ".join(f"{d} {v:,.0f}" for d, v in sorted(devices.items())) + ")"
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
            part = {"model": "weights", "kv": "KV"}.get(kind, "compute")
            if kind.startswith("projector"):  # the image encoder's weights and buffer
                part = "projector"
            parts[part] = parts.get(part, 0.0) + mib
        self.split.setText(" · ".join(f"{k} {v:,.0f} MiB" for k, v in parts.items()))

    def show_remote(self) -> None:
        """A model on a server: its memory is the server's, not this machine's."""
        text = "on the server (it owns the model's memory)"
        for label in (self.ram, self.vram, self.split):
            label.setText(text)

    def show_error(self, kind: str, message: str, fix: str = "") -> None:
        if kind == "oom_load":
            fix = fix or "lower GPU layers or pick a smaller quant."
            head = f"Out of memory while loading the weights: {fix[0].lower()}{fix[1:]}"
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
