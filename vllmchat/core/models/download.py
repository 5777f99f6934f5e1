"""Resumable, verified downloads of GGUF quants.

Bytes go to ``<models>/.partial/<name>.part``; a later run (after a cancel,
a dropped connection or a killed process) resumes from the bytes already on
disk with an HTTP range request. Each file's SHA-256 is checked against the
hub's LFS metadata before it is renamed into place, so a file that failed
its hash is never listed. A split set is listed only when all its parts are.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vllmchat.core.models.catalog import CatalogError, QuantFile, RemoteFile, _hub_error
from vllmchat.core.models.events import DownloadProgress

CHUNK = 1 << 20
NET_CHUNK = 1 << 18
DISK_MARGIN = 64 << 20


class DownloadError(RuntimeError):
    """A download failed; the message says why. Partial bytes are kept unless said."""


class DownloadCancelled(DownloadError):
    """Cancelled by the user; the partial file is kept for a later resume."""


def local_path(models_dir: Path, repo: str, filename: str) -> Path:
    """Where a downloaded file lives: ``<models>/<owner>/<repo>/<filename>``."""
    return models_dir / repo / filename


def projector_path(models_dir: Path, quant: QuantFile) -> Path | None:
    """Where a quant's projector is downloaded (None: the repository has none)."""
    if quant.projector is None:
        return None
    return local_path(models_dir, quant.repo, quant.projector.filename)


def _retryable(exc: Exception) -> bool:
    import httpx2

    if isinstance(exc, httpx2.TransportError):
        return True
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status is not None and (status >= 500 or status == 429)


class Downloader:
    """Downloads quants into a models folder; one instance may serve many downloads."""

    def __init__(
        self,
        models_dir: Path,
        *,
        token: str | None = None,
        retries: int = 6,
        backoff_s: float = 0.5,
    ) -> None:
        self.models_dir = Path(models_dir)
        self.token = token
        self.retries = retries
        self.backoff_s = backoff_s

    def partial_path(self, part: RemoteFile) -> Path:
        return self.models_dir / ".partial" / (part.filename.replace("/", "__") + ".part")

    def download(
        self,
        quant: QuantFile,
        *,
        on_progress: Callable[[DownloadProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Path:
        """Download every part of ``quant``, and its projector; returns the path llama.cpp
        opens (the projector's: ``projector_path``)."""
        cancel = cancel or threading.Event()
        files = quant.files
        targets = [local_path(self.models_dir, quant.repo, p.filename) for p in files]
        todo = [(p, t) for p, t in zip(files, targets, strict=True) if not t.exists()]
        self._check_space(todo)
        done_before = sum(p.size for p, t in zip(files, targets, strict=True) if t.exists())
        done_before += sum(self._have(p) for p, _ in todo)  # a stopped download's .part bytes
        meter = _Meter(quant.filename, quant.download_size, done_before, on_progress)
        for part, target in todo:
            self._download_part(quant, part, target, meter, cancel)
        return targets[0]

    def _check_space(self, todo: list[tuple[RemoteFile, Path]]) -> None:
        need = sum(p.size - self._have(p) for p, _ in todo)
        if not need:
            return
        self.models_dir.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.models_dir).free
        if free < need + DISK_MARGIN:
            raise DownloadError(
                f"Not enough disk space in {self.models_dir}: the download needs "
                f"{need / 2**30:.2f} GiB, {free / 2**30:.2f} GiB are free."
            )

    def _have(self, part: RemoteFile) -> int:
        path = self.partial_path(part)
        return path.stat().st_size if path.exists() else 0

    def _download_part(
        self,
        quant: QuantFile,
        part: RemoteFile,
        target: Path,
        meter: _Meter,
        cancel: threading.Event,
    ) -> None:
        partial = self.partial_path(part)
        partial.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        if partial.exists() and partial.stat().st_size > part.size:
            partial.unlink()
        if partial.exists():
            with partial.open("rb") as fh:
                for block in iter(lambda: fh.read(CHUNK), b""):
                    digest.update(block)
        attempt = 0
        while True:
            have = partial.stat().st_size if partial.exists() else 0
            if have >= part.size:
                break
            try:
                self._fetch(quant, part, partial, have, digest, meter, cancel)
                attempt = 0
            except DownloadCancelled:
                raise
            except _Restart:
                digest = hashlib.sha256()
            except CatalogError as exc:
                raise DownloadError(str(exc)) from exc
            except Exception as exc:
                if not _retryable(exc) or attempt >= self.retries:
                    raise DownloadError(f"Download of {part.filename} failed: {exc}") from exc
                time.sleep(self.backoff_s * (2**attempt))
                attempt += 1
        if part.sha256 and digest.hexdigest() != part.sha256:
            partial.unlink(missing_ok=True)
            raise DownloadError(
                f"{part.filename} does not match the hub's SHA-256; the download was discarded."
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, target)

    def _fetch(
        self,
        quant: QuantFile,
        part: RemoteFile,
        partial: Path,
        have: int,
        digest: hashlib._Hash,
        meter: _Meter,
        cancel: threading.Event,
    ) -> None:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(quant.repo, part.filename, revision=quant.revision)
        headers = build_hf_headers(token=self.token)
        if have:
            headers["Range"] = f"bytes={have}-"
        with get_session().stream(
            "GET", url, headers=headers, follow_redirects=True, timeout=30
        ) as response:
            if response.status_code in (401, 403, 404):
                response.read()
                try:
                    hf_raise_for_status(response)
                except Exception as exc:
                    raise _hub_error(exc, quant.repo) from exc
            hf_raise_for_status(response)
            if have and response.status_code != 206:  # the server ignored the range
                partial.unlink()
                meter.rewind(have)
                raise _Restart
            with partial.open("ab") as fh:
                for block in response.iter_bytes(NET_CHUNK):
                    if cancel.is_set():
                        raise DownloadCancelled(f"Download of {part.filename} cancelled.")
                    fh.write(block)
                    digest.update(block)
                    meter.add(len(block))


class _Restart(Exception):
    """The server sent the whole file instead of the range asked for."""


class _Meter:
    """Progress, speed (over the last seconds) and ETA."""

    def __init__(
        self, filename: str, total: int, done: int, sink: Callable[[DownloadProgress], None] | None
    ) -> None:
        self.filename, self.total, self.done, self.sink = filename, total, done, sink
        self.window: list[tuple[float, int]] = [(time.monotonic(), done)]
        self.last_emit = 0.0

    def rewind(self, n: int) -> None:
        self.done -= n

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        self.window.append((now, self.done))
        while len(self.window) > 2 and now - self.window[0][0] > 3.0:
            self.window.pop(0)
        if self.sink and (now - self.last_emit > 0.1 or self.done >= self.total):
            self.last_emit = now
            t0, d0 = self.window[0]
            speed = (self.done - d0) / (now - t0) if now > t0 else 0.0
            eta = (self.total - self.done) / speed if speed > 0 else float("inf")
            self.sink(DownloadProgress(self.filename, self.done, self.total, speed, eta))
