"""Batch-invariant llama.cpp kernels, applied to its source before the build.

Speculative decoding verifies k drafted tokens in one batch; greedy output stays
token-for-token what single steps give only if a token's logits do not depend on
how many tokens share its batch. Vendored llama.cpp breaks that where a faster
kernel is chosen by batch size:

- CPU: llamafile's tinyBLAS runs for batches of 2 or more (F16, Q8_0, Q4_0
  matrices and the F16 attention product without flash attention); repacked
  weights (Q4_0, Q4_K, IQ4_NL) take a 4-row gemm for batches, a gemv for one;
  flash attention splits the KV cache across threads for one query once it holds
  512 cells.
- CUDA: the quantized matrix-vector kernel sums a row with 4 warps for 1-4
  columns and 2 for 5-8; flash attention takes the vector kernel for one query
  and the tensor-core kernel for more, and splits the KV cache into a number of
  parts chosen from the query count and the KV length.
- The KV cache: after rejected drafts are removed, the slot search may restart
  at cell 0 of a sliding-window ring, so cells stop following positions there and
  attention sums the keys in another order.

Batches of up to ``VERIFY_ROWS`` tokens (``VERIFY_ROWS_GPU`` on CUDA, the
matrix-vector kernel's limit) now take the single-token kernels, with a KV split
that depends on neither the query count nor the KV length; prompt prefill
(longer batches) keeps the fast ones. Stdlib only: ``scripts/setup.sh`` runs it
before the venv exists.

    python -m vllmchat.setup.batch_invariant SRC_DIR   # patch an unpacked sdist
    python -m vllmchat.setup.batch_invariant --id      # the patch's identity
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

VERIFY_ROWS = 16
VERIFY_ROWS_GPU = 8  # CUDA's quantized matrix-vector kernel takes up to 8 columns
# Most tokens one exact verify holds. CUDA's kernel takes up to 8, but on the CPU batches
# of 8 to 16 were measured apart from single steps (Gemma 3: up to 1.6 in a logit, with
# repacking off too; the H200's CPU: 0.05) while 2 to 7 matched.
VERIFY_ROWS_EXACT = 7
COVERS = ("cpu", "cuda", "swa_ring")  # what the marker tells the engine
MARKER_MODULE = "llama_cpp/_vllmchat_build.py"
_CPU = "vendor/llama.cpp/ggml/src/ggml-cpu/"
_CUDA = "vendor/llama.cpp/ggml/src/ggml-cuda/"
_SRC = "vendor/llama.cpp/src/"


@dataclass(frozen=True)
class SourceEdit:
    """One exact replacement in one source file; the text must occur once."""

    path: str
    old: str
    new: str


EDITS = (
    SourceEdit(
        _CPU + "llamafile/sgemm.cpp",
        "    if (n < 2)\n        return false;\n#endif",
        f"    if (n <= {VERIFY_ROWS})  // vllmchat: small batches take the single-token path\n"
        "        return false;\n#endif",
    ),
    SourceEdit(
        _CPU + "repack.cpp",
        "        if (nrows > 3) {\n            gemm<",
        f"        const bool per_row = ne11 <= {VERIFY_ROWS};  // vllmchat: batch-invariant\n"
        "        if (nrows > 3 && !per_row) {\n            gemm<",
    ),
    SourceEdit(
        _CPU + "repack.cpp",
        "        for (int iter = nrows - (nrows % 4); iter < nrows; iter++) {\n            gemv<",
        "        for (int iter = per_row ? 0 : nrows - (nrows % 4); iter < nrows; iter++) {\n"
        "            gemv<",
    ),
    SourceEdit(
        _CPU + "repack.cpp",
        "            for (int64_t i11 = ith * 4; i11 < ne11 - ne11 % 4; i11 += nth * 4) {\n"
        "                ggml_quantize_mat_t<INTER_SIZE, PARAM_TYPE>",
        f"            const int64_t n_grouped = ne11 <= {VERIFY_ROWS} ? 0 : ne11 - ne11 % 4;\n"
        "            for (int64_t i11 = ith * 4; i11 < n_grouped; i11 += nth * 4) {\n"
        "                ggml_quantize_mat_t<INTER_SIZE, PARAM_TYPE>",
    ),
    SourceEdit(
        _CPU + "repack.cpp",
        "            const int64_t i11_processed = ne11 - ne11 % 4;\n"
        "            for (int64_t i11 = i11_processed + ith; i11 < ne11; i11 += nth) {\n"
        "                from_float(",
        "            const int64_t i11_processed = n_grouped;\n"
        "            for (int64_t i11 = i11_processed + ith; i11 < ne11; i11 += nth) {\n"
        "                from_float(",
    ),
    SourceEdit(
        _CPU + "ops.cpp",
        "const bool use_split_kv_path = !use_ref && (neq1 == 1 && neq3 == 1)",
        "const bool use_split_kv_path = false && !use_ref && (neq1 == 1 && neq3 == 1)",
    ),
    # CUDA: 4 warps sum a row for 1 to 8 columns (2 for 5-8 before); on Turing the
    # one-column choice holds for all eight.
    SourceEdit(
        _CUDA + "mmvq.cu",
        "            case 5:\n            case 6:\n            case 7:\n            case 8:\n"
        "                return 2;\n            default:\n                return 1;\n        }\n"
        "    } else if (table_id == MMVQ_PARAMETERS_GCN) {",
        "            case 5:\n            case 6:\n            case 7:\n            case 8:\n"
        "                return 4;  // vllmchat: the same sum order as one column\n"
        "            default:\n                return 1;\n        }\n"
        "    } else if (table_id == MMVQ_PARAMETERS_GCN) {",
    ),
    SourceEdit(
        _CUDA + "mmvq.cu",
        "    if (table_id == MMVQ_PARAMETERS_TURING) {\n        if (ncols_dst == 1) {",
        "    if (table_id == MMVQ_PARAMETERS_TURING) {\n"
        "        if (ncols_dst >= 1 && ncols_dst <= 8) {  // vllmchat: batch-invariant",
    ),
    # CUDA flash attention: the vector kernel, one query per block, for up to 16 queries.
    SourceEdit(
        _CUDA + "fattn.cu",
        "    if (turing_mma_available(cc) && Q->ne[0] != 40 && Q->ne[0] != 72) {\n"
        "        if (can_use_vector_kernel) {\n",
        "    if (turing_mma_available(cc) && Q->ne[0] != 40 && Q->ne[0] != 72) {\n"
        f"        if (can_use_vector_kernel && Q->ne[1] <= {VERIFY_ROWS}) {{  // vllmchat\n"
        "            return BEST_FATTN_KERNEL_VEC;\n        }\n"
        "        if (can_use_vector_kernel) {\n",
    ),
    SourceEdit(
        _CUDA + "fattn-vec.cuh",
        "    if (Q->ne[1] == 1) {\n        constexpr int cols_per_block = 1;",
        f"    if (Q->ne[1] <= {VERIFY_ROWS}) {{  // vllmchat: each query alone in its block\n"
        "        constexpr int cols_per_block = 1;",
    ),
    SourceEdit(
        _CUDA + "fattn-common.cuh",
        "        parallel_blocks = std::min(parallel_blocks, ntiles_KV);",
        "        // vllmchat: for a few queries the KV split depends neither on their count"
        " nor on\n"
        "        // the KV length (parts past the cache add exact zeros when combined).\n"
        f"        const bool split_fixed = ntiles_x <= {VERIFY_ROWS} && !use_sparse;\n"
        "        const int ntiles_KV_split = split_fixed ? 64 : ntiles_KV;\n"
        "        const int ntiles_dst_split = split_fixed ? ntiles_dst / ntiles_x : ntiles_dst;\n"
        "        parallel_blocks = std::min(parallel_blocks, ntiles_KV_split);",
    ),
    SourceEdit(
        _CUDA + "fattn-common.cuh",
        "        for (int parallel_blocks_test = parallel_blocks;"
        " parallel_blocks_test <= ntiles_KV; ++parallel_blocks_test) {\n"
        "            const int nblocks_total = ntiles_dst * parallel_blocks_test;",
        "        for (int parallel_blocks_test = parallel_blocks;"
        " parallel_blocks_test <= ntiles_KV_split; ++parallel_blocks_test) {\n"
        "            const int nblocks_total = ntiles_dst_split * parallel_blocks_test;",
    ),
    # The KV cache: a sliding-window ring's slot search never restarts at cell 0, so its
    # cells keep following positions after rejected drafts are removed.
    SourceEdit(
        _SRC + "llama-kv-cache.cpp",
        "        if (head_cur > cells.get_used() + 2*n_tokens) {",
        "        if (n_swa == 0 && head_cur > cells.get_used() + 2*n_tokens) {  // vllmchat",
    ),
)


def patch_id() -> str:
    """A short hash of the edits: part of the wheel cache's key and the build marker."""
    digest = hashlib.sha256(marker_text("").encode())
    for edit in EDITS:
        digest.update("\0".join((edit.path, edit.old, edit.new)).encode())
    return digest.hexdigest()[:12]


class PatchError(RuntimeError):
    """The source does not hold an edit's text exactly once (another llama.cpp version)."""


def apply(source: Path) -> None:
    """Apply every edit to the unpacked llama-cpp-python sdist at ``source``, and mark it."""
    texts: dict[str, str] = {}
    for edit in EDITS:
        text = texts.get(edit.path)
        if text is None:
            text = (source / edit.path).read_text(encoding="utf-8")
        if text.count(edit.old) != 1:
            raise PatchError(
                f"{edit.path}: expected the text to patch once, found it "
                f"{text.count(edit.old)} times; this llama.cpp version needs new edits"
            )
        texts[edit.path] = text.replace(edit.old, edit.new)
    for path, text in texts.items():
        (source / path).write_text(text, encoding="utf-8")
    (source / MARKER_MODULE).write_text(marker_text(patch_id()), encoding="utf-8")


def marker_text(build_id: str) -> str:
    """The marker module: the build's id, what it covers and the verify-row limits (the
    engine's one source of them)."""
    return (
        '"""Written by vllmchat\'s set-up: this build\'s kernels are batch-invariant."""\n'
        f'BATCH_INVARIANT = "{build_id}"\nCOVERS = {COVERS!r}\n'
        f"VERIFY_ROWS = {VERIFY_ROWS}\nVERIFY_ROWS_GPU = {VERIFY_ROWS_GPU}\n"
        f"VERIFY_ROWS_EXACT = {VERIFY_ROWS_EXACT}\n"
    )


def main(argv: list[str]) -> int:
    """Patch the sdist named in ``argv``, or print the patch's id with ``--id``."""
    if argv == ["--id"]:
        print(patch_id())
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        apply(Path(argv[0]))
    except (OSError, PatchError) as error:
        print(f"vllmchat set-up: cannot patch llama.cpp: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
