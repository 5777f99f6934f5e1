"""Write mixture-of-experts GGUFs (llama.cpp's ``qwen3moe`` graph) of real shapes.

Weights are random quant blocks with sane scales, written tensor by tensor, so
a 30B-parameter model never exists in memory or as F16 on disk. Their text is
noise; their shapes, memory and speed are real.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vllmchat.bench.synthetic.synth import _vocab, add_vocab


@dataclass(frozen=True)
class MoeShape:
    """Dimensions of a Qwen3-MoE-shaped model."""

    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_vocab: int = 0  # 0: the small synthetic vocabulary
    n_ctx_train: int = 32768


MOE_SHAPES: dict[str, MoeShape] = {
    # A tiny MoE for the tests: every part of the real graph, in kilobytes.
    "tiny-moe": MoeShape(64, 4, 4, 2, 16, 8, 2, 32),
    # A small one whose buffers are large enough to compare with the estimate.
    "small-moe": MoeShape(512, 6, 8, 2, 64, 16, 4, 256),
    # OLMoE-1B-7B's proportions (16 layers, 64 experts, 8 used).
    "olmoe-1b-7b": MoeShape(2048, 16, 16, 16, 128, 64, 8, 1024, n_vocab=50304),
    # gpt-oss-20b's proportions (24 layers, 32 experts, 4 used, GQA 64/8, head 64) in the
    # qwen3moe graph, its width rounded to Q4_K's 256-value blocks: about 12 GB at Q4_K_M.
    "gpt-oss-20b": MoeShape(2816, 24, 64, 8, 64, 32, 4, 2816, n_vocab=201088),
    # Qwen3-30B-A3B: 48 layers, 128 experts, 8 used, GQA 32/4, head 128.
    "qwen3-30b-a3b": MoeShape(2048, 48, 32, 4, 128, 128, 8, 768, n_vocab=151936),
}

# ggml block layouts: (values per block, bytes per block, byte offsets of the f16 scales)
_BLOCKS = {
    "Q8_0": (32, 34, (0,)),
    "Q4_K": (256, 144, (0, 2)),
    "Q6_K": (256, 210, (208,)),
}
_SCALE = {"Q8_0": 0.004, "Q4_K": 0.002, "Q6_K": 0.0005}


class _Blocks:
    """A pool of random quant blocks, scales set to small finite values."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.pools: dict[str, np.ndarray] = {}

    def make(self, qtype: str, n_values: int) -> np.ndarray:
        per, size, scale_at = _BLOCKS[qtype]
        n_blocks = n_values // per
        pool = self.pools.get(qtype)
        if pool is None:
            pool = self.rng.integers(0, 256, (4099, size), dtype=np.uint8)
            for at in scale_at:
                pool[:, at : at + 2] = np.frombuffer(np.float16(_SCALE[qtype]).tobytes(), np.uint8)
            if qtype == "Q6_K":  # int8 sub-block scales: small
                pool[:, 192:208] = self.rng.integers(1, 8, (pool.shape[0], 16), dtype=np.uint8)
            self.pools[qtype] = pool
        shift = int(self.rng.integers(0, pool.shape[0]))
        reps = -(-n_blocks // pool.shape[0]) + 1
        flat = np.tile(pool, (reps, 1))[shift : shift + n_blocks]
        return np.ascontiguousarray(flat).reshape(-1)


def _tensor_list(sh: MoeShape, n_vocab: int) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, numpy shape, kind) in file order; kind: norm, attn, expert_gu, expert_down, out."""
    q_dim, kv_dim = sh.n_head * sh.head_dim, sh.n_head_kv * sh.head_dim
    out: list[tuple[str, tuple[int, ...], str]] = [
        ("token_embd.weight", (n_vocab, sh.n_embd), "embd")
    ]
    for i in range(sh.n_layer):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", (sh.n_embd,), "norm"),
            (p + "attn_q.weight", (q_dim, sh.n_embd), "attn"),
            (p + "attn_k.weight", (kv_dim, sh.n_embd), "attn"),
            (p + "attn_v.weight", (kv_dim, sh.n_embd), "attn_v"),
            (p + "attn_output.weight", (sh.n_embd, q_dim), "attn"),
            (p + "attn_q_norm.weight", (sh.head_dim,), "norm"),
            (p + "attn_k_norm.weight", (sh.head_dim,), "norm"),
            (p + "ffn_norm.weight", (sh.n_embd,), "norm"),
            (p + "ffn_gate_inp.weight", (sh.n_expert, sh.n_embd), "router"),
            (p + "ffn_gate_exps.weight", (sh.n_expert, sh.n_ff_exp, sh.n_embd), "expert"),
            (p + "ffn_down_exps.weight", (sh.n_expert, sh.n_embd, sh.n_ff_exp), "expert_down"),
            (p + "ffn_up_exps.weight", (sh.n_expert, sh.n_ff_exp, sh.n_embd), "expert"),
        ]
    out += [
        ("output_norm.weight", (sh.n_embd,), "norm"),
        ("output.weight", (n_vocab, sh.n_embd), "out"),
    ]
    return out


def _qtype(kind: str, layer: int, quant: str) -> str:
    """The type of a tensor: F32 for norms and the router; otherwise as Q4_K_M mixes
    (Q6_K for the output, V and half the layers' down projections) or all Q8_0."""
    if kind in ("norm", "router"):
        return "F32"
    if quant == "F32":
        return "F32"
    if quant == "Q8_0":
        return "Q8_0"
    if kind == "out" or (kind in ("attn_v", "expert_down") and layer % 2 == 0):
        return "Q6_K"
    return "Q4_K"


def write_moe_gguf(
    path: str | Path, shape: MoeShape | str = "tiny-moe", *, quant: str = "F32", seed: int = 0
) -> Path:
    """Write a Qwen3-MoE GGUF of ``shape`` (``quant``: F32, Q8_0 or Q4_K_M); returns its path."""
    import gguf

    sh = MOE_SHAPES[shape] if isinstance(shape, str) else shape
    tokens, scores, types = _vocab()
    if sh.n_vocab > len(tokens):  # pad to the real vocabulary's size (its tables matter)
        extra = sh.n_vocab - len(tokens)
        tokens = tokens + [f"t{i}" for i in range(extra)]
        scores = scores + [-1e4] * extra
        types = types + [1] * extra
    n_vocab = len(tokens)
    rng = np.random.default_rng(seed)
    blocks = _Blocks(rng)
    out = Path(path)
    w = gguf.GGUFWriter(str(out), "qwen3moe")
    w.add_name(f"synthetic-qwen3moe-{sh.n_embd}x{sh.n_layer}x{sh.n_expert}")
    w.add_context_length(sh.n_ctx_train)
    w.add_embedding_length(sh.n_embd)
    w.add_block_count(sh.n_layer)
    w.add_feed_forward_length(sh.n_ff_exp * sh.n_expert_used)
    w.add_expert_feed_forward_length(sh.n_ff_exp)
    w.add_expert_count(sh.n_expert)
    w.add_expert_used_count(sh.n_expert_used)
    w.add_head_count(sh.n_head)
    w.add_head_count_kv(sh.n_head_kv)
    w.add_key_length(sh.head_dim)
    w.add_value_length(sh.head_dim)
    w.add_rope_dimension_count(sh.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_file_type(
        gguf.LlamaFileType.ALL_F32
        if quant == "F32"
        else gguf.LlamaFileType.MOSTLY_Q8_0
        if quant == "Q8_0"
        else gguf.LlamaFileType.MOSTLY_Q4_K_M
    )
    add_vocab(w, tokens, scores, types)
    plan = []
    for name, shape_np, kind in _tensor_list(sh, n_vocab):
        layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
        qtype = _qtype(kind, layer, quant)
        n_values = int(np.prod(shape_np))
        if qtype == "F32":
            nbytes = 4 * n_values
            w.add_tensor_info(name, shape_np, np.dtype(np.float32), nbytes)
        else:
            per, size, _ = _BLOCKS[qtype]
            nbytes = n_values // per * size
            byte_shape = (*shape_np[:-1], shape_np[-1] // per * size)
            w.add_tensor_info(
                name,
                byte_shape,
                np.dtype(np.uint8),
                nbytes,
                raw_dtype=gguf.GGMLQuantizationType[qtype],
            )
        plan.append((kind, qtype, shape_np, n_values))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for kind, qtype, shape_np, n_values in plan:
        if qtype != "F32":
            w.write_tensor_data(blocks.make(qtype, n_values))
        elif kind == "norm":
            w.write_tensor_data(np.ones(shape_np, dtype=np.float32))
        else:
            scale = 0.02 if kind == "router" else 0.5 / np.sqrt(shape_np[-1])
            w.write_tensor_data(
                (rng.standard_normal(shape_np, dtype=np.float32) * scale).astype(np.float32)
            )
    w.close()
    return out


def main() -> None:
    """``python -m vllmchat.bench.synthetic.synth_moe OUT.gguf SHAPE [QUANT]``."""
    import sys

    path, shape = sys.argv[1], sys.argv[2]
    quant = sys.argv[3] if len(sys.argv) > 3 else "Q4_K_M"
    print(write_moe_gguf(path, shape, quant=quant))


if __name__ == "__main__":
    main()
