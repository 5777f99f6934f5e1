"""Tuning results per model file, device, backend and memory-relevant settings."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from vllmchat.core.engine.model_check import model_fingerprint
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.paths import measurements_dir
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings
from vllmchat.core.tuning.results import TuneResult


def tune_key(settings: LoadSettings, hw: HardwareInfo, margin_mib: int = GPU_MARGIN_MIB) -> str:
    """What a tuning result depends on: the file, the devices, the backends, the
    settings that decide memory (not the layers, threads or ubatch it chooses) and
    the device memory it keeps free."""
    parts = {
        "margin_mib": margin_mib,
        "model": model_fingerprint(settings.model_path),
        "devices": [(g.name, g.total) for g in hw.gpus] if hw.gpu_offload else [],
        "backends": sorted(b.name for b in hw.backends),
        "cores": os.cpu_count(),
        "memory": {
            k: getattr(settings, k)
            for k in ("n_ctx", "type_k", "type_v", "flash_attn", "swa_full", "use_mmap")
        },
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


class TuneCache:
    """One JSON file per key under the cache folder."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or measurements_dir() / "tuning"

    def get(
        self, settings: LoadSettings, hw: HardwareInfo, margin_mib: int = GPU_MARGIN_MIB
    ) -> TuneResult | None:
        try:
            path = self.folder / f"{tune_key(settings, hw, margin_mib)}.json"
            return TuneResult.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(
        self,
        settings: LoadSettings,
        hw: HardwareInfo,
        result: TuneResult,
        margin_mib: int = GPU_MARGIN_MIB,
    ) -> None:
        if result.stopped or result.pick is None:
            return  # a partial sweep is not reused
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{tune_key(settings, hw, margin_mib)}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass
