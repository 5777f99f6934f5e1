"""What a GGUF model is, from its header: shapes per layer, sizes, window, template."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vllmchat.core.gguf_header import GGUFHeader

# Layers that use the sliding window, by architecture, when the GGUF has no
# explicit pattern: llama.cpp's defaults (every n-th layer is dense).
_SWA_PATTERN_DEFAULTS = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "llama4": 4, "gpt-oss": 2}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.")
# Expert tensors as llama.cpp's --n-cpu-moe matches them (LLM_FFN_EXPS_REGEX): separate
# or fused gate/up, and chunked experts; shared experts (``_shexp``) are not among them.
EXPERT_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_EXPERT_RE = re.compile(EXPERT_REGEX)
# Types the CPU backend repacks into an interleaved copy (x86 AVX2 and newer).
REPACKED_TYPES = frozenset({"Q4_0", "Q4_K", "IQ4_NL"})


def _per_layer(value: Any, n_layer: int, default: int) -> list[int]:
    if value is None:
        return [default] * n_layer
    if isinstance(value, np.ndarray | list):
        items = [int(v) for v in value]
        return (items + [items[-1]] * n_layer)[:n_layer] if items else [default] * n_layer
    return [int(value)] * n_layer


@dataclass(frozen=True)
class TensorPlace:
    """Where a tensor sits in the file and which layer it belongs to."""

    offset: int
    n_bytes: int
    layer: int  # -1: token embeddings, -2: output head and norm
    repack: bool
    expert: bool = False  # an expert tensor of a mixture-of-experts layer
    name: str = ""


@dataclass(frozen=True)
class ModelDescription:
    """Shapes and sizes of a model, enough to estimate its memory."""

    architecture: str
    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    n_head: list[int]
    n_head_kv: list[int]
    head_dim_k: int
    head_dim_v: int
    n_swa: int
    swa_layers: list[bool]
    layer_bytes: list[int]
    layer_repack_bytes: list[int]
    input_bytes: int  # token embeddings: always on the CPU
    output_bytes: int  # output norm and head: on the GPU only when all layers are
    output_repack_bytes: int
    tied_output: bool = False  # no output.weight: the head reuses token embeddings
    tensor_types: dict[str, int] = field(default_factory=dict)  # bytes by quant type
    tensors: list[TensorPlace] = field(default_factory=list)
    chat_template: str | None = None
    file_type: int | None = None
    n_expert: int = 0  # experts per MoE layer (0: a dense model)
    n_expert_used: int = 0  # experts read per token
    n_ff_exp: int = 0  # feed-forward length of one expert
    expert_bytes: list[int] = field(default_factory=list)  # per layer, part of layer_bytes

    @property
    def is_moe(self) -> bool:
        """A mixture of experts whose expert tensors llama.cpp's overrides can place."""
        return self.n_expert > 0 and any(self.expert_bytes)

    @property
    def moe_unplaceable_reason(self) -> str:
        """Why the experts cannot be placed apart ("" when they can, or for a dense model)."""
        if self.n_expert > 0 and not any(self.expert_bytes):
            return (
                f"This model has {self.n_expert} experts per layer, but its expert tensors "
                "are named in a way llama.cpp's expert placement does not recognise."
            )
        return ""

    @property
    def moe_layers(self) -> int:
        """Layers that hold expert tensors."""
        return sum(1 for b in self.expert_bytes if b)

    @property
    def weights_bytes(self) -> int:
        return sum(self.layer_bytes) + self.input_bytes + self.output_bytes

    @property
    def main_quant(self) -> str:
        """The quant type holding most of the bytes."""
        return (
            max(self.tensor_types, key=self.tensor_types.__getitem__) if self.tensor_types else ""
        )


def describe(header: GGUFHeader) -> ModelDescription:
    """A ``ModelDescription`` from a parsed header."""
    arch = header.architecture
    get = header.arch_value
    n_layer = int(get("block_count", 0))
    n_embd = int(get("embedding_length", 0))
    heads = _per_layer(get("attention.head_count"), n_layer, 1)
    heads_kv = _per_layer(get("attention.head_count_kv"), n_layer, heads[0] if heads else 1)
    head_dim = n_embd // heads[0] if heads and heads[0] else 0
    n_swa = int(get("attention.sliding_window", 0) or 0)
    pattern = get("attention.sliding_window_pattern")
    if n_swa and isinstance(pattern, np.ndarray | list):
        swa = [bool(v) for v in pattern][:n_layer]
    elif n_swa:
        every = int(pattern) if pattern else _SWA_PATTERN_DEFAULTS.get(arch, 0)
        swa = [bool(every) and (i % every) < every - 1 for i in range(n_layer)]
    else:
        swa = [False] * n_layer
    layer_bytes = [0] * n_layer
    layer_repack = [0] * n_layer
    expert_bytes = [0] * n_layer
    types: dict[str, int] = defaultdict(int)
    input_bytes = output_bytes = output_repack = 0
    n_vocab = int(header.array_lengths.get("tokenizer.ggml.tokens", get("vocab_size", 0) or 0))
    places = []
    for t in header.tensors:
        types[t.type_name] += t.n_bytes
        m = _LAYER_RE.match(t.name)
        embd = t.name.startswith("token_embd")
        repack = (
            t.n_bytes
            if (
                t.type_name in REPACKED_TYPES
                and len(t.shape) == 2
                and not embd
                and t.shape[1] % 8 == 0
            )
            else 0
        )
        expert = False
        if m and int(m.group(1)) < n_layer:
            layer = int(m.group(1))
            layer_bytes[layer] += t.n_bytes
            layer_repack[layer] += repack
            if _EXPERT_RE.search(t.name):
                expert = True
                expert_bytes[layer] += t.n_bytes
        elif embd:
            layer = -1
            input_bytes += t.n_bytes
        else:
            layer = -2
            output_bytes += t.n_bytes
            output_repack += repack
        places.append(TensorPlace(t.offset, t.n_bytes, layer, bool(repack), expert, t.name))
    return ModelDescription(
        architecture=arch,
        name=str(header.metadata.get("general.name", "")),
        n_layer=n_layer,
        n_embd=n_embd,
        n_ff=int(np.max(get("feed_forward_length", 0))),
        n_vocab=n_vocab,
        n_ctx_train=int(get("context_length", 0) or 0),
        n_head=heads,
        n_head_kv=heads_kv,
        head_dim_k=int(get("attention.key_length", head_dim) or head_dim),
        head_dim_v=int(get("attention.value_length", head_dim) or head_dim),
        n_swa=n_swa,
        swa_layers=swa,
        layer_bytes=layer_bytes,
        layer_repack_bytes=layer_repack,
        input_bytes=input_bytes,
        output_bytes=output_bytes,
        output_repack_bytes=output_repack,
        tied_output=not any(t.name == "output.weight" for t in header.tensors),
        tensor_types=dict(types),
        tensors=places,
        chat_template=header.metadata.get("tokenizer.chat_template"),
        file_type=header.metadata.get("general.file_type"),
        n_expert=int(get("expert_count", 0) or 0),
        n_expert_used=int(np.max(get("expert_used_count", 0) or 0)),
        expert_bytes=expert_bytes,
        n_ff_exp=int(np.max(get("expert_feed_forward_length", 0) or 0)),
    )
