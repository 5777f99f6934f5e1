"""The set-up's decisions for a machine, made without building anything.

``python -m vllmchat.setup --plan [--json] [--platform P]`` prints them: the
llama.cpp backend and why, its CMake flags, llama.cpp's library file names, the
app's folders, and whether speculative verifies can be exact with that backend.

``python -m vllmchat.setup.plan`` keeps the older form: shell assignments
(``BACKEND``, ``CMAKE_ARGS``, ``APT_PACKAGES``, ``CUDACXX``) on stdout and the
reasons on stderr; exit code 2, saying what to install, when a backend forced with
``VLLMCHAT_BACKEND`` cannot be built.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from vllmchat.core.engine.exactness import BuildMarker, KernelSetup, exactness
from vllmchat.core.machine.backend import BackendChoice, choose_backend
from vllmchat.core.machine.install_hints import install_hint
from vllmchat.core.machine.llama_libs import library_names
from vllmchat.setup import batch_invariant
from vllmchat.setup.folders import folders
from vllmchat.setup.targets import Target, this_machine

LIBRARIES = ("ggml", "ggml-base", "llama", "mtmd")
_GGML_NAMES = {"cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal", "hip": "ROCm", "cpu": "CPU"}


@dataclass(frozen=True)
class Plan:
    """What the set-up would build and where the app keeps its files, for one machine."""

    target: Target
    choice: BackendChoice

    @property
    def cudacxx(self) -> str:
        nvcc = self.target.facts.nvcc
        return nvcc if self.choice.backend == "cuda" and nvcc else ""

    def libraries(self) -> dict[str, list[str]]:
        """Each llama.cpp library's file names on the platform, the usual one first."""
        return {n: list(library_names(n, self.target.sys_platform)) for n in LIBRARIES}

    def exact_verify(self) -> tuple[bool, str]:
        """Whether a speculative verify can be exact with this backend (every layer
        on its device, flash attention on, a dense model), and why not."""
        marker = BuildMarker(
            frozenset(batch_invariant.COVERS),
            batch_invariant.VERIFY_ROWS_EXACT,
            batch_invariant.VERIFY_ROWS_GPU,
        )
        backend = self.choice.backend
        caps = tuple(
            (int(major), int(minor))
            for major, _, minor in (c.partition(".") for c in self.target.facts.nvidia_compute_caps)
            if major.isdigit() and minor.isdigit()
        )
        at = KernelSetup(
            gpu_layers=backend != "cpu",
            backends=(_GGML_NAMES.get(backend, backend), "CPU"),
            flash_attn=True,
            moe=False,
            swa_ring=False,
            compute=caps,
        )
        answer = exactness(marker, at)
        if answer.exact:
            return True, ""
        covered = ", ".join(batch_invariant.COVERS)
        return False, f"{answer.reason} (the batch-invariance edits cover: {covered})"

    def needs(self) -> list[str]:
        """What must be installed before this backend can be built, named for the OS."""
        system, backend = self.target.system, self.choice.backend
        found = [install_hint("compiler", system)]
        if backend == "cuda":
            found.append(install_hint("cuda", system))
        if backend == "vulkan" and system == "windows":
            found.append(install_hint("vulkan", system))
        return found

    def to_dict(self) -> dict[str, Any]:
        exact, why = self.exact_verify()
        windows = self.target.sys_platform == "win32"
        return {
            "platform": self.target.name,
            "injected": self.target.injected,
            "system": self.target.system,
            "machine": self.target.facts.machine,
            "backend": self.choice.backend,
            "reason": self.choice.reason,
            "notes": list(self.choice.notes),
            "error": self.choice.error,
            "cmake_args": list(self.choice.cmake_args),
            "apt_packages": list(self.choice.apt_packages),
            "cudacxx": self.cudacxx,
            "needs": self.needs(),
            "libraries": self.libraries(),
            "folders": folders(self.target.sys_platform, injected=self.target.injected),
            "venv_python": ".venv\\Scripts\\python.exe" if windows else ".venv/bin/python",
            "exact_verify": exact,
            "exact_verify_reason": why,
        }

    def to_text(self) -> str:
        d = self.to_dict()
        if d["error"]:
            return f"{d['platform']}: {d['error']}"
        lines = [
            f"platform     {d['platform']}" + ("" if d["injected"] else " (this machine)"),
            f"backend      {d['backend']}: {d['reason']}",
            f"cmake args   {' '.join(d['cmake_args'])}",
            "libraries    " + ", ".join(v[0] for v in d["libraries"].values()),
            f"exact verify {'yes' if d['exact_verify'] else 'no: ' + d['exact_verify_reason']}",
        ]
        lines += [f"folder       {k}: {v}" for k, v in d["folders"].items()]
        lines += [f"needs        {n}" for n in d["needs"]]
        lines += [f"note         {n}" for n in d["notes"]]
        return "\n".join(lines)


def make_plan(target: Target | None = None, requested: str | None = None) -> Plan:
    """The plan for ``target`` (this machine by default); ``requested`` forces a
    backend, as ``VLLMCHAT_BACKEND`` does."""
    target = target or this_machine()
    return Plan(target, choose_backend(target.facts, requested))


def main() -> int:
    plan = make_plan(requested=os.environ.get("VLLMCHAT_BACKEND"))
    choice = plan.choice
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
        "CUDACXX": plan.cudacxx,
    }
    for name, value in assignments.items():
        print(f"{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
