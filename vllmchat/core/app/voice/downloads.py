"""The voice's models downloaded from Hugging Face, with progress, resume and hash checks.

``VoiceDownloads.download(name)`` is the intent: its events say the download started
(with the size the hub reports), its progress (the models layer's
``DownloadProgress``), then ``VoiceModelReady`` or ``VoiceDownloadFailed``. The bytes
go through the model manager's ``Downloader`` into ``<voice>/.downloads``: a dropped
connection resumes with a range request, a cancelled download resumes on the next
try, the disk's free space is checked first, and each LFS file is checked against the
SHA-256 the hub reports (a mismatch removes the file). A downloaded Whisper model is
moved into the Whisper folder, a Piper voice is prepared for sherpa-onnx in its own.

``python -m vllmchat.core.app.voice.downloads [NAME ...]`` lists the models on offer,
or downloads those named.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import re
import sys
import threading
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from vllmchat.core.models.catalog import CatalogError, QuantFile, RemoteFile, _hub_error
from vllmchat.core.models.download import Downloader, DownloadError, local_path
from vllmchat.core.models.events import DownloadProgress
from vllmchat.core.voice.catalogue import CATALOGUE, CatalogueModel, catalogue_model
from vllmchat.core.voice.models import (
    VoiceModelMissing,
    install_whisper,
    read_voice,
    voice_models_dir,
)
from vllmchat.core.voice.piper_prepare import VoiceConfigError, prepare_voice

log = logging.getLogger(__name__)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class VoiceModelOffer:
    """A model on offer, for the voice settings' list: installed, or how much of it a
    stopped download already holds."""

    model: CatalogueModel
    installed: bool
    partial_bytes: int


@dataclass(frozen=True)
class VoiceDownloadStarted:
    """The hub answered: the model's files hold ``total`` bytes in all."""

    name: str
    total: int


@dataclass(frozen=True)
class VoiceModelReady:
    """The model is verified and in place: a Piper voice to pick, or the Whisper model."""

    name: str
    kind: str  # "whisper" or "piper"
    path: Path


@dataclass(frozen=True)
class VoiceDownloadFailed:
    """The download stopped; ``message`` says why in one line. A cancelled or dropped
    download keeps its bytes and resumes when started again."""

    name: str
    message: str
    cancelled: bool = False


VoiceDownloadEvent = VoiceDownloadStarted | DownloadProgress | VoiceModelReady | VoiceDownloadFailed


class VoiceDownloads:
    """Downloads the catalogue's voice models; one instance may serve many downloads."""

    def __init__(
        self, *, token: str | None = None, retries: int = 6, backoff_s: float = 0.5
    ) -> None:
        self.token = token if token is not None else (os.environ.get("HF_TOKEN") or None)
        self.retries = retries
        self.backoff_s = backoff_s

    @property
    def downloads_dir(self) -> Path:
        return voice_models_dir() / ".downloads"

    def offers(self) -> list[VoiceModelOffer]:
        """The catalogue, each model marked installed or with the bytes already fetched."""
        downloader = self._downloader()
        return [
            VoiceModelOffer(
                model,
                is_installed(model),
                sum(
                    path.stat().st_size
                    for path in (
                        downloader.partial_path(RemoteFile(f, 0, None)) for f in model.files
                    )
                    if path.is_file()
                ),
            )
            for model in CATALOGUE
        ]

    def download(
        self, name: str, *, cancel: threading.Event | None = None
    ) -> Generator[VoiceDownloadEvent, None, None]:
        """Download the model ``name`` of the catalogue and install it. Closing the
        iterator early cancels the download (its bytes are kept for a resume)."""
        cancel = cancel or threading.Event()
        try:
            model = catalogue_model(name)
        except KeyError as exc:
            yield VoiceDownloadFailed(name, str(exc.args[0]))
            return
        if is_installed(model):
            yield VoiceModelReady(name, model.kind, voice_models_dir() / name)
            return
        try:
            files = remote_files(model, self.token)
        except CatalogError as exc:
            yield VoiceDownloadFailed(name, str(exc))
            return
        quant = QuantFile(model.repo, model.name, files, model.revision)
        yield VoiceDownloadStarted(name, quant.download_size)
        failure = yield from self._fetch(quant, cancel)
        if failure is not None:
            yield failure
            return
        yield self._install(model)

    def _downloader(self) -> Downloader:
        return Downloader(
            self.downloads_dir, token=self.token, retries=self.retries, backoff_s=self.backoff_s
        )

    def _fetch(
        self, quant: QuantFile, cancel: threading.Event
    ) -> Generator[DownloadProgress, None, VoiceDownloadFailed | None]:
        """The download on a thread of its own, its progress passed on as it comes;
        returns the failure, if any (the generator's return value)."""
        updates: queue.Queue[DownloadProgress | None] = queue.Queue()
        failure: list[VoiceDownloadFailed] = []

        def work() -> None:
            try:
                self._downloader().download(quant, on_progress=updates.put, cancel=cancel)
            except DownloadError as exc:
                stopped = cancel.is_set()
                message = f"{exc} Download it again to resume." if stopped else str(exc)
                if isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.ENOSPC:
                    message = (
                        f"The disk holding {self.downloads_dir} is full: free some space, "
                        "then download again to resume."
                    )
                failure.append(VoiceDownloadFailed(quant.label, message, cancelled=stopped))
            except Exception as exc:  # a full disk mid-file, or anything unforeseen: said
                log.error("The voice model download failed: %s", exc, exc_info=exc)
                failure.append(VoiceDownloadFailed(quant.label, f"The download failed: {exc}"))
            finally:
                updates.put(None)

        thread = threading.Thread(target=work, name="voice model download", daemon=True)
        thread.start()
        try:
            while (update := updates.get()) is not None:
                yield update
        finally:
            if thread.is_alive():
                cancel.set()
            thread.join()
        return failure[0] if failure else None

    def _install(self, model: CatalogueModel) -> VoiceModelReady | VoiceDownloadFailed:
        """Move the downloaded files into place (a voice prepared for sherpa-onnx)."""
        files = [local_path(self.downloads_dir, model.repo, f) for f in model.files]
        try:
            if model.kind == "whisper":
                path = install_whisper(files, model.name)
            else:
                path = prepare_voice(files[0], files[1], voice_models_dir() / model.name, move=True)
        except (VoiceConfigError, VoiceModelMissing, OSError) as exc:
            message = f"The downloaded {model.name} cannot be used ({exc}); download it again."
            return VoiceDownloadFailed(model.name, message)
        finally:
            for file in files:
                file.unlink(missing_ok=True)
            _prune_empty(files, self.downloads_dir)
        return VoiceModelReady(model.name, model.kind, path)


def remote_files(model: CatalogueModel, token: str | None = None) -> list[RemoteFile]:
    """Each file's size and, for LFS files, the SHA-256 the hub reports (its ETag)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    found = []
    for filename in model.files:
        url = hf_hub_url(model.repo, filename, revision=model.revision)
        try:
            meta = get_hf_file_metadata(url, token=token)
        except Exception as exc:
            raise _hub_error(exc, model.repo) from exc
        etag = (meta.etag or "").lower()
        found.append(
            RemoteFile(filename, int(meta.size or 0), etag if _SHA256.match(etag) else None)
        )
    return found


def is_installed(model: CatalogueModel) -> bool:
    """Whether ``model`` is in place (a voice that reads whole; the Whisper model's file)."""
    folder = voice_models_dir() / model.name
    if model.kind == "whisper":
        return (folder / "model.bin").is_file()
    try:
        read_voice(folder)
    except VoiceConfigError:
        return False
    return True


def _prune_empty(files: list[Path], root: Path) -> None:
    """Remove the folders the downloaded files left empty, up to ``root``."""
    for file in files:
        folder = file.parent
        while folder != root and root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent


def main(argv: list[str] | None = None) -> int:
    """List the models on offer, or download those named, progress on stderr."""
    names = sys.argv[1:] if argv is None else argv
    downloads = VoiceDownloads()
    if not names:
        for offer in downloads.offers():
            mark = "installed" if offer.installed else ""
            if not offer.installed and offer.partial_bytes:
                mark = f"{offer.partial_bytes / 1e6:,.0f} MB kept: resumes"
            print(f"{offer.model.name:24} {offer.model.describe():56} {mark}")
        return 0
    failed = 0
    for name in names:
        events = downloads.download(name)
        try:
            for event in events:
                failed += _show(event)
        except KeyboardInterrupt:
            events.close()
            print(f"\n{name}: cancelled; run the same command again to resume", file=sys.stderr)
            return 130
    return 1 if failed else 0


def _show(event: VoiceDownloadEvent) -> int:
    if isinstance(event, DownloadProgress):
        sys.stderr.write(f"\r{event.filename}: {event.fraction * 100:5.1f}%   ")
    elif isinstance(event, VoiceDownloadStarted):
        print(f"{event.name}: downloading {event.total / 1e6:,.1f} MB", file=sys.stderr)
    elif isinstance(event, VoiceModelReady):
        print(f"\n{event.name}: ready in {event.path}", file=sys.stderr)
    else:
        print(f"\n{event.name}: {event.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
