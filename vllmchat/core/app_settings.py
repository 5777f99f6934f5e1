"""The app's persisted settings (JSON in the config folder), with safe defaults."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from vllmchat.core.conversations.policy import ContextPolicy, PolicyMode
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.settings import KvType, LoadSettings, SamplingSettings, default_threads

# The default is the model's own: its chat template supplies the system prompt it
# was tuned with (SmolLM2: "You are a helpful AI assistant named SmolLM, ..."),
# which small models answer best with.
DEFAULT_PRESETS = {
    "Model's default": "",
    "Helpful assistant": "You are a helpful assistant.",
    "Concise": "You are a concise assistant. Answer in as few words as possible.",
    "Programmer": "You are an expert programmer. Answer with correct, idiomatic code.",
    "Translator": "Translate the user's messages into English. Output only the translation.",
}

# Changing these needs the model to be reloaded.
RELOAD_FIELDS = (
    "model_path",
    "n_gpu_layers",
    "n_ctx",
    "n_threads",
    "type_k",
    "type_v",
    "flash_attn",
    "n_batch",
    "use_mmap",
)


@dataclass(frozen=True, kw_only=True)
class AppSettings:
    """Everything the user can set; the model settings need a reload when changed."""

    model_path: str = ""
    n_gpu_layers: int = 0
    n_ctx: int = 4096
    n_threads: int = field(default_factory=default_threads)
    type_k: KvType = "f16"
    type_v: KvType = "f16"
    flash_attn: bool = False
    n_batch: int = 512
    use_mmap: bool = True
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    max_tokens: int = 512
    seed: int = -1
    system_prompt: str = DEFAULT_PRESETS["Model's default"]
    presets: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PRESETS))
    policy: PolicyMode = "summarize"
    summarize_threshold: float = 0.75
    summarize_every: int = 0
    keep_last_turns: int = 3
    model_folders: list[str] = field(default_factory=list)

    def load_settings(self) -> LoadSettings:
        return LoadSettings(
            model_path=self.model_path,
            n_gpu_layers=self.n_gpu_layers,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            type_k=self.type_k,
            type_v=self.type_v,
            flash_attn=self.flash_attn,
            n_batch=self.n_batch,
            use_mmap=self.use_mmap,
        )

    def sampling(self) -> SamplingSettings:
        return SamplingSettings(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )

    def context_policy(self) -> ContextPolicy:
        return ContextPolicy(
            mode=self.policy,
            threshold=self.summarize_threshold,
            every_k_turns=self.summarize_every,
            keep_last_turns=self.keep_last_turns,
        )

    def fit_settings(self) -> FitSettings:
        """The settings the memory estimate needs."""
        return FitSettings(
            n_gpu_layers=self.n_gpu_layers,
            n_ctx=self.n_ctx,
            type_k=self.type_k,
            type_v=self.type_v,
            flash_attn=self.flash_attn,
        )

    def needs_reload(self, other: AppSettings) -> bool:
        return any(getattr(self, f) != getattr(other, f) for f in RELOAD_FIELDS)

    def with_changes(self, **changes: Any) -> AppSettings:
        return replace(self, **changes)


def settings_path() -> Path:
    from vllmchat.core.paths import config_dir

    return config_dir() / "settings.json"


def load_app_settings(path: Path | None = None) -> AppSettings:
    """Saved settings; unknown keys are ignored, bad values fall back to defaults."""
    path = path or settings_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return AppSettings()
    defaults = AppSettings()
    known = {f.name: f for f in fields(AppSettings)}
    clean: dict[str, Any] = {}
    for key, value in data.items() if isinstance(data, dict) else ():
        if key in known and isinstance(value, type(getattr(defaults, key))):
            clean[key] = value
    try:
        settings = AppSettings(**clean)
        settings.load_settings() if settings.model_path else None
        return settings
    except (TypeError, ValueError):
        return AppSettings()


def save_app_settings(settings: AppSettings, path: Path | None = None) -> None:
    """Write atomically."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".settings-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(asdict(settings), fh, indent=1)
    os.replace(tmp, path)
