"""Typed events streamed from the engine, and the errors it can report."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ErrorKind(str, enum.Enum):
    """Why something failed; each kind has its own fix."""

    MISSING_FILE = "missing_file"
    NOT_GGUF = "not_gguf"
    TRUNCATED = "truncated"
    CORRUPT = "corrupt"
    UNSUPPORTED_ARCH = "unsupported_arch"
    OOM_LOAD = "oom_load"
    OOM_GENERATE = "oom_generate"
    CONTEXT_FULL = "context_full"
    PROMPT_TOO_LONG = "prompt_too_long"
    ENGINE_DIED = "engine_died"
    NO_MODEL = "no_model"
    STATE_MISMATCH = "state_mismatch"
    BAD_REQUEST = "bad_request"
    INTERNAL = "internal"
    SERVER_UNREACHABLE = "server_unreachable"
    SERVER_AUTH = "server_auth"
    SERVER_MODEL = "server_model"
    SERVER_TIMEOUT = "server_timeout"
    SERVER_ERROR = "server_error"
    NOT_REMOTE = "not_remote"
    STORAGE = "storage"
    NO_VISION = "no_vision"


FIXES: dict[ErrorKind, str] = {
    ErrorKind.MISSING_FILE: "Pick the model again or download it.",
    ErrorKind.NOT_GGUF: "Choose a .gguf model file.",
    ErrorKind.TRUNCATED: "The file is incomplete: download it again (downloads resume).",
    ErrorKind.CORRUPT: "The file is damaged: download it again.",
    ErrorKind.UNSUPPORTED_ARCH: "This llama.cpp build cannot run this architecture.",
    ErrorKind.OOM_LOAD: "The weights do not fit: lower n_gpu_layers or pick a smaller quant.",
    ErrorKind.OOM_GENERATE: (
        "The KV cache or compute buffers do not fit: shorten the context, "
        "use a q8_0/q4_0 KV cache, or summarize the history."
    ),
    ErrorKind.CONTEXT_FULL: "The context is full: summarize or drop old turns, or raise n_ctx.",
    ErrorKind.PROMPT_TOO_LONG: "Shorten the message or raise n_ctx.",
    ErrorKind.ENGINE_DIED: "Restart the engine; the conversation is kept.",
    ErrorKind.NO_MODEL: "Load a model first.",
    ErrorKind.STATE_MISMATCH: "The saved state belongs to another model or settings.",
    ErrorKind.BAD_REQUEST: "",
    ErrorKind.INTERNAL: "",
    ErrorKind.SERVER_UNREACHABLE: "Check that the server runs and the URL is right; then retry.",
    ErrorKind.SERVER_AUTH: "Check the API key for this server.",
    ErrorKind.SERVER_MODEL: "Choose one of the server's models (they are listed by /v1/models).",
    ErrorKind.SERVER_TIMEOUT: "The server is busy or stalled: retry, or use a smaller model there.",
    ErrorKind.SERVER_ERROR: "The server failed: retry; its own log tells why.",
    ErrorKind.NOT_REMOTE: "The server owns its memory and its cache.",
    ErrorKind.STORAGE: "Free some disk space; what is already stored is safe.",
    ErrorKind.NO_VISION: (
        "Load the model with its projector (mmproj_path), or pick a model with vision."
    ),
}


class EngineError(RuntimeError):
    """An engine failure with a kind and a human message."""

    def __init__(self, kind: ErrorKind, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)
        self.message = message
        self._fix = fix  # a fix more precise than the kind's

    @property
    def fix(self) -> str:
        return self._fix if self._fix is not None else FIXES[self.kind]

    def __str__(self) -> str:
        fix = self.fix
        return f"{self.message} {fix}".strip() if fix else self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (EngineError, (self.kind, self.message, self._fix))


@dataclass(frozen=True)
class TurnStats:
    """What one turn cost."""

    prompt_tokens: int = 0
    tokens_reused: int = 0
    tokens_prefilled: int = 0
    tokens_new: int = 0
    prefill_s: float = 0.0
    ttft_s: float = 0.0
    decode_tokens: int = 0
    decode_s: float = 0.0
    stop_reason: str = ""
    n_ctx: int = 0
    kv_tokens: int = 0
    drafted: int = 0  # tokens guessed by speculation and checked
    accepted: int = 0  # of those, taken (each one a decode step saved)
    note: str = ""  # something the user should know about this turn
    images_encoded: int = 0  # image chunks the projector encoded (0: all came from the KV)
    image_tokens: int = 0  # of ``tokens_prefilled``, those of images

    @property
    def decode_tok_s(self) -> float:
        """Tokens per second between the first and the last sampled token."""
        if self.decode_tokens < 2 or self.decode_s <= 0:
            return 0.0
        return (self.decode_tokens - 1) / self.decode_s

    @property
    def prefill_tok_s(self) -> float:
        return self.tokens_prefilled / self.prefill_s if self.prefill_s > 0 else 0.0


@dataclass(frozen=True)
class TokenEvent:
    """Text of newly sampled tokens (may be empty inside a UTF-8 sequence)."""

    text: str
    token_id: int


@dataclass(frozen=True)
class PrefillProgressEvent:
    """Prompt tokens processed so far in this turn."""

    done: int
    total: int


@dataclass(frozen=True)
class StatsEvent:
    """Statistics of the finished turn."""

    stats: TurnStats


@dataclass(frozen=True)
class DoneEvent:
    """The turn ended; ``text`` is the whole reply (partial if stopped)."""

    text: str
    stop_reason: str
    stats: TurnStats = field(default_factory=TurnStats)
    token_ids: tuple[int, ...] = ()  # the reply as sampled, to reuse its KV cache later

    @property
    def partial(self) -> bool:
        return self.stop_reason in ("stopped", "error")


@dataclass(frozen=True)
class ErrorEvent:
    """The turn failed; ``partial_text`` is what was generated before."""

    kind: ErrorKind
    message: str
    partial_text: str = ""
    precise_fix: str | None = None  # a fix more precise than the kind's

    @property
    def fix(self) -> str:
        return self.precise_fix if self.precise_fix is not None else FIXES[ErrorKind(self.kind)]

    def as_error(self) -> EngineError:
        return EngineError(self.kind, self.message)


Event = TokenEvent | PrefillProgressEvent | StatsEvent | DoneEvent | ErrorEvent
