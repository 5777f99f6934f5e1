"""A venv whose python's pip only records what it was asked to build and install, and
whose ``pip download`` hands over a small llama-cpp-python sdist holding exactly the
text the batch-invariance edits replace: a real llama.cpp build takes many minutes
(a CUDA one needs a GPU machine's toolkit). Everything else it runs is the real Python."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

from vllmchat.setup import batch_invariant

VERSION = "0.3.36"
WHEEL = f"llama_cpp_python-{VERSION}-py3-none-linux_x86_64.whl"

FAKE_PYTHON = """#!/bin/bash
if [ "$1" = -m ] && [ "$2" = pip ]; then
  case "$3" in
    download)
      while [ $# -gt 0 ]; do [ "$1" = -d ] && out=$2; shift; done
      cp "$SDIST" "$out/"; exit 0;;
    wheel)
      echo "wheel CMAKE_ARGS=$CMAKE_ARGS CUDACXX=${CUDACXX:-}" >> "$LOG"
      while [ $# -gt 0 ]; do [ "$1" = -w ] && out=$2; shift; done
      if [ -n "$SLEEP" ]; then : > "$out/WHEEL"; sleep "$SLEEP"; fi
      echo built > "$out/WHEEL"; exit 0;;
    install) case "$*" in *llama_cpp_python*) echo "install" >> "$LOG";; esac; exit 0;;
  esac
fi
exec REAL "$@"
"""


def write_sdist(path: Path) -> Path:
    """llama-cpp-python's sdist as far as the edits see it: each edited text once."""
    texts: dict[str, str] = {}
    for edit in batch_invariant.EDITS:
        texts[edit.path] = texts.get(edit.path, "") + edit.old + "\n/* ... */\n"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in texts.items():
            data = text.encode()
            info = tarfile.TarInfo(f"llama_cpp_python-{VERSION}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(f"llama_cpp_python-{VERSION}/llama_cpp")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    return path


def fake_venv(tmp: Path) -> dict[str, str]:
    """A fake venv, an empty wheel cache, a log and a temporary folder under ``tmp``:
    the environment variables that point the set-up at them."""
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text(FAKE_PYTHON.replace("REAL", sys.executable).replace("WHEEL", WHEEL))
    fake.chmod(0o755)
    (tmp / "tmp").mkdir()
    return {
        "VLLMCHAT_VENV": str(venv),
        "LOG": str(tmp / "log"),
        "SDIST": str(write_sdist(tmp / f"llama_cpp_python-{VERSION}.tar.gz")),
        "VLLMCHAT_WHEEL_CACHE": str(tmp / "wheels"),
        "TMPDIR": str(tmp / "tmp"),
    }
