"""Write small llama-architecture GGUFs with random weights and a real SPM vocabulary.

Their text is noise; their shapes, memory and speed are real. The vocabulary
holds the control tokens of the common chat templates, so template handling can
be tested on a model that has no sliding-window attention.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CONTROL_TOKENS = (
    "<start_of_turn>",
    "<end_of_turn>",
    "<|im_start|>",
    "<|im_end|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "[INST]",
    "[/INST]",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
)


@dataclass(frozen=True)
class Shape:
    """Dimensions of a llama-shaped model."""

    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx_train: int = 4096


SHAPES: dict[str, Shape] = {
    "tiny": Shape(64, 2, 4, 2, 128),
    "small": Shape(256, 4, 4, 2, 768),
    "1b": Shape(2048, 22, 32, 4, 5632),
    "8b": Shape(4096, 32, 32, 8, 14336),
}


def _vocab() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]  # UNKNOWN, CONTROL, CONTROL
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256  # BYTE
    words = ["▁"] + [f"▁{c}" for c in string.ascii_letters] + list(string.printable[:94])
    words += ["▁the", "▁a", "▁is", "▁of", "▁and", "▁to", "er", "in", "on", "at", "en"]
    seen = set(tokens)
    for w in words:
        if w not in seen:
            seen.add(w)
            tokens.append(w)
            types.append(1)  # NORMAL
    for c in CONTROL_TOKENS:
        tokens.append(c)
        types.append(3)
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    return tokens, scores, types


def add_vocab(w: Any, tokens: list[str], scores: list[float], types: list[int]) -> None:
    """An SPM vocabulary with BOS 1, EOS 2, UNK 0, BOS added."""
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)


def write_llama_gguf(
    path: str | Path,
    shape: Shape | str = "tiny",
    *,
    chat_template: str | None = None,
    seed: int = 0,
    dtype: str = "f32",
) -> Path:
    """Write a llama GGUF of ``shape`` with random weights; returns its path."""
    import gguf

    sh = SHAPES[shape] if isinstance(shape, str) else shape
    tokens, scores, types = _vocab()
    n_vocab = len(tokens)
    head_dim = sh.n_embd // sh.n_head
    out = Path(path)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"synthetic-llama-{sh.n_embd}x{sh.n_layer}")
    w.add_context_length(sh.n_ctx_train)
    w.add_embedding_length(sh.n_embd)
    w.add_block_count(sh.n_layer)
    w.add_feed_forward_length(sh.n_ff)
    w.add_rope_dimension_count(head_dim)
    w.add_head_count(sh.n_head)
    w.add_head_count_kv(sh.n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    add_vocab(w, tokens, scores, types)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    rng = np.random.default_rng(seed)
    np_dtype = np.float32 if dtype == "f32" else np.float16

    def tensor(name: str, *dims: int, norm: bool = False) -> None:
        if norm:
            arr = np.ones(dims, dtype=np.float32)
        else:
            arr = (rng.standard_normal(dims, dtype=np.float32) * 0.5).astype(np_dtype)
        w.add_tensor(name, arr)

    tensor("token_embd.weight", n_vocab, sh.n_embd)
    tensor("output_norm.weight", sh.n_embd, norm=True)
    tensor("output.weight", n_vocab, sh.n_embd)
    kv = sh.n_head_kv * head_dim
    for i in range(sh.n_layer):
        p = f"blk.{i}."
        tensor(p + "attn_norm.weight", sh.n_embd, norm=True)
        tensor(p + "attn_q.weight", sh.n_embd, sh.n_embd)
        tensor(p + "attn_k.weight", kv, sh.n_embd)
        tensor(p + "attn_v.weight", kv, sh.n_embd)
        tensor(p + "attn_output.weight", sh.n_embd, sh.n_embd)
        tensor(p + "ffn_norm.weight", sh.n_embd, norm=True)
        tensor(p + "ffn_gate.weight", sh.n_ff, sh.n_embd)
        tensor(p + "ffn_up.weight", sh.n_ff, sh.n_embd)
        tensor(p + "ffn_down.weight", sh.n_embd, sh.n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
