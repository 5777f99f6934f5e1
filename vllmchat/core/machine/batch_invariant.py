"""Batch-invariant CPU kernels for llama.cpp, applied to its source before the build.

Speculative decoding verifies k drafted tokens in one batch; greedy output stays
token-for-token what single steps give only if a token's logits do not depend on
how many tokens share its batch. Vendored ggml's CPU backend breaks that in three
places, each a faster kernel chosen by batch size:

- llamafile's tinyBLAS runs for batches of 2 or more (F16, Q8_0, Q4_0 matrices and
  the F16 attention product without flash attention);
- repacked weights (Q4_0, Q4_K, IQ4_NL) take a 4-row gemm for batches, a gemv for one;
- flash attention splits the KV cache across threads for a single query once it
  holds 512 cells.

Batches of up to ``VERIFY_ROWS`` tokens now take the single-token kernels; prompt
prefill (longer batches) keeps the fast ones, and single-query attention always
runs per head. Stdlib only: ``scripts/setup.sh`` runs it before the venv exists.

    python -m vllmchat.core.machine.batch_invariant SRC_DIR   # patch an unpacked sdist
    python -m vllmchat.core.machine.batch_invariant --id      # the patch's identity
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

VERIFY_ROWS = 16
MARKER_MODULE = "llama_cpp/_vllmchat_build.py"
_CPU = "vendor/llama.cpp/ggml/src/ggml-cpu/"


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
)


def patch_id() -> str:
    """A short hash of the edits: part of the wheel cache's key and the build marker."""
    digest = hashlib.sha256()
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
    (source / MARKER_MODULE).write_text(
        '"""Written by vllmchat\'s set-up: this build\'s CPU kernels are batch-invariant."""\n'
        f'BATCH_INVARIANT_CPU = "{patch_id()}"\nVERIFY_ROWS = {VERIFY_ROWS}\n',
        encoding="utf-8",
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
