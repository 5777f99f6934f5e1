"""The app's settings: the load, sampling and context-policy settings, composed.

Each setting is declared once, with its one default, in its own dataclass
(``LoadSettings``, ``SamplingSettings``, ``ContextPolicy``); the window, the
terminal's options and ``settings.json`` are all built from those fields.
Changing a load setting needs a reload, and that is derived from where the
field lives, not listed by hand. Version 1 files (one flat object) migrate.

A setting is read one way, where it lives (``settings.load.n_ctx``,
``settings.load.placement.n_gpu_layers``, ``settings.sampler.temperature``,
``settings.history.mode``); changes are given by field name
(``with_changes(n_ctx=2048)``, ``with_changes(n_gpu_layers=8)``), each name
belonging to one part.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.models.projector import projector_beside
from vllmchat.core.placement import PLACEMENT_FIELDS, Placement
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings, SamplingSettings

VERSION = 3

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

# The names version 1 files stored for context-policy fields.
V1_NAMES = {
    "policy": "mode",
    "summarize_threshold": "threshold",
    "summarize_every": "every_k_turns",
}
# Settings only benchmarks set; the app never stores them.
NOT_STORED = {"ignore_eos"}


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


# The load settings' names, the placement's fields among them (not "placement").
LOAD_FIELDS = tuple(n for n in _field_names(LoadSettings) if n != "placement") + PLACEMENT_FIELDS
SAMPLING_FIELDS = _field_names(SamplingSettings)
POLICY_FIELDS = _field_names(ContextPolicy)


@dataclass(frozen=True, kw_only=True)
class AppSettings:
    """Everything the user can set; changes to ``load`` need a reload."""

    load: LoadSettings = field(default_factory=lambda: LoadSettings(model_path=""))
    sampler: SamplingSettings = field(default_factory=SamplingSettings)
    history: ContextPolicy = field(default_factory=ContextPolicy)
    system_prompt: str = DEFAULT_PRESETS["Model's default"]
    presets: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PRESETS))
    model_folders: list[str] = field(default_factory=list)
    # A server to chat through instead of the local engine ("" : the local engine). Its
    # API key lives in the OS keyring, never here.
    server_url: str = ""
    server_model: str = ""
    # Device memory the tuner keeps free: this many MiB or 3% of what the model may use,
    # whichever is larger; a placement that leaves less is never picked.
    gpu_margin_mib: int = GPU_MARGIN_MIB
    # An embedding GGUF for retrieval ("": FTS5 alone): a document answered from passages
    # is then ranked by FTS5 and by its chunks' vectors, fused (reciprocal rank).
    embedding_model: str = ""
    # The local API (``vllmchat serve``, the window's Server panel). It listens on
    # loopback; the LAN needs an API key (kept in the OS keyring, never here).
    api_port: int = 1234
    api_lan: bool = False
    api_cors_origins: list[str] = field(default_factory=list)  # none: CORS is off
    # The KV states the engine keeps, the conversations' and the API clients': in RAM
    # (the least used spill), and on disk in the cache folder (the oldest go first).
    api_cache_ram_mib: int = 2048
    api_cache_disk_mib: int = 8192
    api_queue_limit: int = 16  # requests waiting for the model; more are answered 429
    api_parallel: int = 4  # API clients answered at once, batched (each a sequence of n_ctx)
    api_timeout_s: int = 600  # a request's longest wait and run
    api_idle_unload_min: int = 0  # unload the model after this long unused (0: never)
    # The voice. What is heard: its language ("" : detected), whether the transcript is
    # sent at once (False: it lands in the input box, editable), whether a turn ends at
    # silence (False: push-to-talk). What is spoken: replies at all, the voice ("" : the
    # first installed) and its speed. The devices by name ("" : the system's default).
    # The speech model, a Whisper model of the voice catalogue ("" : whisper-base).
    voice_language: str = ""
    voice_send_at_once: bool = False
    voice_hands_free: bool = False
    voice_speak_replies: bool = False
    voice_name: str = ""
    voice_speed: float = 1.0
    voice_input_device: str = ""
    voice_output_device: str = ""
    voice_recogniser: str = ""

    @classmethod
    def of(cls, **flat: Any) -> AppSettings:
        """Defaults with some settings given by their flat names (``n_ctx=2048``)."""
        return cls().with_changes(**flat)

    def with_changes(self, **changes: Any) -> AppSettings:
        """A copy with settings changed by their flat names; each part is built once."""
        parts: dict[str, dict[str, Any]] = {"load": {}, "sampler": {}, "history": {}}
        own: dict[str, Any] = {}
        for name, value in changes.items():
            if name in _field_names(AppSettings):
                own[name] = value
            elif name in LOAD_FIELDS:
                parts["load"][name] = value
            elif name in SAMPLING_FIELDS:
                parts["sampler"][name] = value
            elif name in POLICY_FIELDS:
                parts["history"][name] = value
            else:
                raise TypeError(f"unknown setting {name!r}")
        if load := parts.pop("load"):
            own["load"] = self.load.with_changes(**load)
        for part, values in parts.items():
            if values:
                own[part] = replace(getattr(self, part), **values)
        return replace(self, **own)

    def with_placement(self, placement: Placement) -> AppSettings:
        """These settings with the model's weights placed anew."""
        return replace(self, load=self.load.with_placement(placement))

    def flat(self) -> dict[str, Any]:
        """Every setting by its field name (what ``with_changes`` takes)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for part in ("load", "sampler", "history"):
            out.pop(part)
        out.update(self.load.flat())
        out.update(asdict(self.sampler))
        out.update(asdict(self.history))
        return out

    def changes_from(self, before: AppSettings) -> dict[str, Any]:
        """The settings that differ from ``before``, by field name."""
        old = before.flat()
        return {name: value for name, value in self.flat().items() if old[name] != value}

    def for_model(self, path: str, **changes: Any) -> AppSettings:
        """Settings for another model file: its expert placement starts anew (the
        experts of one model mean nothing for another), and its projector is the one
        beside it made for its width (as a download places it), or none."""
        fresh: dict[str, Any] = {"n_cpu_moe": 0, "mmproj_path": projector_beside(path) or ""}
        return self.with_changes(model_path=path, **{**fresh, **changes})

    def state_caps(self) -> tuple[int, int]:
        """The kept KV states' RAM budget and disk cap, in bytes."""
        return self.api_cache_ram_mib << 20, self.api_cache_disk_mib << 20

    def fit_settings(self, overhead: int | None = None) -> FitSettings:
        """The settings the memory estimate needs (``overhead``: the GPU runtime's own
        memory as measured on this device, when known)."""
        if overhead is None:
            return FitSettings.of(self.load)
        return FitSettings.of(self.load, overhead=overhead)

    def needs_reload(self, other: AppSettings) -> bool:
        return self.load != other.load

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["sampler"] = {k: v for k, v in data["sampler"].items() if k not in NOT_STORED}
        return {"version": VERSION, **data}


def settings_path() -> Path:
    from vllmchat.core.paths import config_dir

    return config_dir() / "settings.json"


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    """Flat values whose type matches the setting's default; the rest fall back."""
    defaults = AppSettings().flat()
    clean: dict[str, Any] = {}
    for name, value in values.items():
        if name not in defaults or name in NOT_STORED:
            continue  # a setting this version no longer has (or never stores)
        default = defaults[name]
        ok = isinstance(value, type(default)) and not (
            isinstance(value, bool) and not isinstance(default, bool)
        )
        if ok or (isinstance(default, float) and type(value) is int):
            clean[name] = value
    return clean


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Flat settings from any version's file (version 1 was one flat object)."""
    if data.get("version") in (2, VERSION):
        flat: dict[str, Any] = {}
        for part in ("load", "sampler", "history"):
            section = data.get(part)
            flat.update(section if isinstance(section, dict) else {})
        placed = flat.pop("placement", None)  # version 3: nested; version 2: flat already
        flat.update(placed if isinstance(placed, dict) else {})
        flat.update(
            {k: v for k, v in data.items() if k not in ("version", "load", "sampler", "history")}
        )
        return flat
    return {V1_NAMES.get(k, k): v for k, v in data.items() if k != "version"}


def load_app_settings(path: Path | None = None) -> AppSettings:
    """Saved settings; unknown keys are ignored, bad values fall back to their defaults."""
    path = path or settings_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return AppSettings()
    if not isinstance(data, dict):
        return AppSettings()
    clean = _clean(migrate(data))
    try:
        return AppSettings.of(**clean)
    except (TypeError, ValueError):  # a combination that does not hold (q8_0 V without FA)
        load_keys = [k for k in clean if k in LOAD_FIELDS and k != "model_path"]
        return AppSettings.of(**{k: v for k, v in clean.items() if k not in load_keys})


def save_app_settings(settings: AppSettings, path: Path | None = None) -> None:
    """Write atomically."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".settings-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(settings.to_json(), fh, indent=1)
    os.replace(tmp, path)
