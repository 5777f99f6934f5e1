"""The memory panel's live figures: the engine process's RAM and VRAM, and the KV
cache as the turn fills it, read from the bridge's snapshot (never the engine)."""

from __future__ import annotations

import psutil
from PySide6.QtCore import QObject

from vllmchat.core.engine.events import TurnStats
from vllmchat.core.machine import nvml
from vllmchat.core.models.description import ModelDescription
from vllmchat.core.models.memory import FitSettings, kv_bytes_per_layer
from vllmchat.ui.offload.memory_panel import MemoryPanel
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge


class MemoryReadout(QObject):
    """Updates ``memory`` every few seconds and as tokens stream (a QObject of the GUI
    thread: the engine thread's token signal reaches ``count_token`` there)."""

    def __init__(self, bridge: EngineBridge, memory: MemoryPanel) -> None:
        super().__init__(memory)
        self.bridge, self.memory = bridge, memory
        self.last_stats: TurnStats | None = None
        self.live_kv: list[int] | None = None  # [tokens in the KV cache, n_ctx] while a turn runs

    def count_token(self, _text: str) -> None:
        if self.live_kv is not None:
            self.live_kv[0] += 1

    def turn_planned(self, prompt_tokens: int, n_ctx: int) -> None:
        self.live_kv = [prompt_tokens, n_ctx]

    def turn_measured(self, stats: TurnStats) -> None:
        self.last_stats, self.live_kv = stats, None

    def update(self) -> None:
        snapshot = self.bridge.snapshot
        if not snapshot.capabilities.local_memory:
            self.memory.show_remote()
            return
        pid, info = snapshot.pid, snapshot.info
        if info is None or pid is None or not snapshot.alive:
            return
        try:
            rss = psutil.Process(pid).memory_info().rss
        except psutil.Error:
            rss = None
        per_token = _kv_per_token(
            snapshot.description, snapshot.settings.load.type_k, snapshot.settings.load.type_v
        )
        if self.live_kv is not None:  # the turn's prompt and the tokens streamed so far
            kv_tokens, n_ctx = self.live_kv
        else:
            kv_tokens = self.last_stats.kv_tokens if self.last_stats else 0
            n_ctx = info.n_ctx  # the loaded model's (a reload may have changed it)
        self.memory.update_usage(
            rss=rss,
            vram_process=nvml.process_vram(pid),
            buffers_mib=info.buffers_mib,
            kv_tokens=kv_tokens,
            n_ctx=n_ctx,
            kv_bytes_per_token=per_token,
        )


def _kv_per_token(desc: ModelDescription | None, type_k: str, type_v: str) -> float:
    if desc is None:
        return 0.0
    fit = FitSettings(n_ctx=256, type_k=type_k, type_v=type_v)
    return sum(kv_bytes_per_layer(desc, fit)) / 256
