"""``python -m vllmchat.setup.plan``: the llama.cpp build plan for ``setup.sh``.

Prints shell assignments (``BACKEND``, ``CMAKE_ARGS``, ``APT_PACKAGES``,
``CUDACXX``) on stdout and the reasons on stderr; exits 2, saying what to
install, when a backend forced with ``VLLMCHAT_BACKEND`` cannot be built.
"""

from __future__ import annotations

import os
import shlex
import sys

from vllmchat.core.machine.backend import choose_backend
from vllmchat.core.machine.detect import detect_machine


def main() -> int:
    facts = detect_machine()
    choice = choose_backend(facts, os.environ.get("VLLMCHAT_BACKEND"))
    if not choice.ok:
        print(f"vllmchat set-up: {choice.error}", file=sys.stderr)
        return 2
    print(f"vllmchat set-up: llama.cpp backend {choice.backend}: {choice.reason}", file=sys.stderr)
    for note in choice.notes:
        print(f"  note: {note}", file=sys.stderr)
    assignments = {
        "BACKEND": choice.backend,
        "CMAKE_ARGS": " ".join(choice.cmake_args),
        "APT_PACKAGES": " ".join(choice.apt_packages),
        "CUDACXX": facts.nvcc if choice.backend == "cuda" and facts.nvcc else "",
    }
    for name, value in assignments.items():
        print(f"{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
