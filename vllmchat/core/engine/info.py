"""What the engine answers, as typed values that need no llama.cpp to read."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is, and what loading it cost."""

    path: str
    architecture: str
    n_layer: int
    n_ctx_train: int
    n_ctx: int
    n_vocab: int
    n_params: int
    size_bytes: int
    n_swa: int
    chat_template: str
    template_source: str  # "gguf" or "builtin"
    gpu_offload: bool
    load_s: float
    buffers_mib: dict[str, float] = field(default_factory=dict)
    name: str = ""


@dataclass(frozen=True)
class ReloadResult:
    """A live reload: the new model, and whether the conversation's KV state came along."""

    info: ModelInfo
    restored: bool
    tokens: int  # tokens in the KV cache before the reload
    reason: str  # why the state was not restored ("" when it was)
    seconds: float
    state_bytes: int = 0


@dataclass(frozen=True)
class StateTransfer:
    """A KV state written to or read from a file."""

    tokens: int
    bytes: int = 0


@dataclass(frozen=True)
class KvUsage:
    """Tokens in the KV cache against the context size."""

    kv_tokens: int
    n_ctx: int
