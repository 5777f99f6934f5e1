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
    # Tensors llama.cpp's loader reported as overridden to another buffer type
    # (name -> buffer type), e.g. the experts kept in RAM.
    overridden: dict[str, str] = field(default_factory=dict)
    reasoning: str = ""  # how replies hold thinking: "think", "harmony" or "" (none)
    thinking_opens: bool = False  # the prompt opens the thinking (DeepSeek-R1's template)
    thinking_toggle: bool = False  # the template reads enable_thinking
    # A verified batch's rows get exactly the logits of single steps (speculation keeps
    # greedy output token for token): this build's batch-invariant kernels, on the CPU
    # or on CUDA with flash attention (``engine/exactness.py``); the reason when not.
    exact_verify: bool = False
    exact_verify_reason: str = ""
    # A projector loaded beside the model: it takes images (``Capabilities.vision``).
    vision: bool = False
    mmproj_path: str = ""
    image_tokens: int = 0  # context tokens one image takes (one tile)
    image_max_side: int = 0  # larger images are scaled down to this longer side first
    # How the template offers tools and its model calls them ("hermes", "mistral",
    # "llama3", "gpt-oss"; "server": the server's own); "" when it has no tool format.
    tool_format: str = ""
    api_slots: int = 0  # sequences for API clients beside the window's, n_ctx tokens each


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


@dataclass(frozen=True)
class ProcessMemory:
    """What the engine process really holds, next to llama.cpp's own buffer sums.

    ``vram_process``: NVML's per-process figure; ``vram_drop``: the devices' free
    memory lost since the engine process started (where NVML cannot see the
    process). Both None without an NVIDIA driver.
    """

    rss: int
    vram_process: int | None = None
    vram_drop: int | None = None
    buffers_mib: dict[str, float] = field(default_factory=dict)

    @property
    def vram(self) -> int | None:
        """The best device-memory figure there is."""
        return self.vram_process if self.vram_process is not None else self.vram_drop

    @property
    def vram_buffers(self) -> int:
        """Bytes of llama.cpp's buffers on devices other than the CPU."""
        mib = sum(v for k, v in self.buffers_mib.items() if "CPU" not in k.split(":")[-1])
        return int(mib * (1 << 20))


@dataclass(frozen=True)
class SpeedSample:
    """One measurement: a fixed prompt prefilled, a fixed number of tokens decoded."""

    prompt_tokens: int
    prefill_s: float
    decode_tokens: int
    decode_s: float
    n_threads: int
    n_threads_batch: int

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else 0.0


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``model_path`` on ``tokens``; save its log-probs as the reference, or
    compare them with a saved reference."""

    model_path: str
    tokens: tuple[int, ...]
    n_ctx: int = 512
    n_gpu_layers: int = 0
    n_threads: int = 1
    save_reference: str = ""  # .npy path for this model's log-probs
    reference: str = ""  # .npy path of the reference's log-probs


@dataclass(frozen=True)
class TextScore:
    """Quality figures on the scored tokens."""

    tokens_scored: int
    perplexity: float
    kld_mean: float | None  # None without a reference
    kld_p99: float | None
    top1_agreement: float | None
    seconds: float
