"""A Hugging Face-compatible mirror on loopback, for tests with the real client.

Serves the endpoints ``huggingface_hub`` calls (model info with file metadata,
model search, ``resolve`` downloads with range support and LFS hashes) from
files on disk, and can misbehave on purpose: drop a connection mid-file, answer
5xx, send wrong bytes, require a token, throttle.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Faults:
    """Misbehaviour to inject; counters go down as faults fire."""

    drop_after: dict[str, int] = field(default_factory=dict)  # filename -> bytes, once
    errors_5xx: dict[str, int] = field(default_factory=dict)  # filename -> count
    corrupt: set[str] = field(default_factory=set)
    bytes_per_s: float | None = None
    ignore_range: bool = False


@dataclass
class Repo:
    files: dict[str, Path]
    gated: bool = False
    downloads: int = 0


class Mirror:
    """The mirror's state; ``url`` is what ``HF_ENDPOINT`` should be."""

    def __init__(self, token: str = "hf_good") -> None:
        self.repos: dict[str, Repo] = {}
        self.faults = Faults()
        self.token = token
        self.log: list[tuple[str, str, str | None]] = []  # (method, path, range)
        self._sha: dict[Path, str] = {}
        handler = type("Handler", (_Handler,), {"mirror": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Mirror:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def add(
        self, repo: str, files: dict[str, Path], *, gated: bool = False, downloads: int = 0
    ) -> None:
        self.repos[repo] = Repo(dict(files), gated, downloads)

    def sha256(self, path: Path) -> str:
        if path not in self._sha:
            digest = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            self._sha[path] = digest.hexdigest()
        return self._sha[path]

    def range_requests(self, filename: str) -> list[str | None]:
        return [r for m, p, r in self.log if m == "GET" and p.endswith("/" + filename)]


_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class _Handler(BaseHTTPRequestHandler):
    mirror: Mirror
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has headers only
            self.wfile.write(data)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def _authorized(self, repo: Repo) -> bool:
        return not repo.gated or self.headers.get("Authorization") == f"Bearer {self.mirror.token}"

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_GET(self, head: bool = False) -> None:
        m = self.mirror
        url = urlparse(self.path)
        path = unquote(url.path)
        m.log.append(("HEAD" if head else "GET", path, self.headers.get("Range")))
        if path == "/api/models":
            return self._search(parse_qs(url.query))
        if info := _INFO.match(path):
            return self._info(info.group("repo"))
        if res := _RESOLVE.match(path):
            return self._resolve(res.group("repo"), res.group("file"), head)
        self._error(404, "EntryNotFound", f"no route for {path}")

    def _search(self, query: dict[str, list[str]]) -> None:
        text = (query.get("search") or [""])[0].lower()
        hits = [
            {"id": r, "modelId": r, "downloads": repo.downloads, "likes": 0, "tags": ["gguf"]}
            for r, repo in self.mirror.repos.items()
            if text in r.lower()
        ]
        hits.sort(key=lambda h: -h["downloads"])
        limit = int((query.get("limit") or ["100"])[0])
        self._json(200, hits[:limit])

    def _info(self, name: str) -> None:
        repo = self.mirror.repos.get(name)
        if repo is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        if not self._authorized(repo):
            return self._error(403, "GatedRepo", "Access to this model is restricted")
        siblings = []
        for fname, fpath in repo.files.items():
            size = fpath.stat().st_size
            siblings.append(
                {
                    "rfilename": fname,
                    "size": size,
                    "blobId": "0" * 40,
                    "lfs": {"sha256": self.mirror.sha256(fpath), "size": size, "pointerSize": 134},
                }
            )
        self._json(
            200,
            {
                "_id": name,
                "id": name,
                "modelId": name,
                "sha": COMMIT,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "downloads": repo.downloads,
                "likes": 0,
                "tags": ["gguf"],
                "siblings": siblings,
            },
        )

    def _resolve(self, name: str, filename: str, head: bool) -> None:
        m = self.mirror
        repo = m.repos.get(name)
        if repo is None:
            return self._error(401, "RepoNotFound", "Repository not found")
        if not self._authorized(repo):
            return self._error(403, "GatedRepo", "Access to this model is restricted")
        fpath = repo.files.get(filename)
        if fpath is None:
            return self._error(404, "EntryNotFound", "Entry not found")
        if not head and m.faults.errors_5xx.get(filename, 0) > 0:
            m.faults.errors_5xx[filename] -= 1
            return self._error(503, "ServiceUnavailable", "try again")
        size = fpath.stat().st_size
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        partial = False
        if rng and not m.faults.ignore_range:
            a, _, b = rng.removeprefix("bytes=").partition("-")
            start = int(a)
            end = min(int(b), size - 1) if b else size - 1
            partial = True
        self.send_response(206 if partial else 200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{m.sha256(fpath)}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("X-Linked-Etag", f'"{m.sha256(fpath)}"')
        self.send_header("X-Linked-Size", str(size))
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if head:
            return
        drop_at = m.faults.drop_after.pop(filename, None)
        sent = 0
        with fpath.open("rb") as fh:
            fh.seek(start)
            remaining = end - start + 1
            while remaining > 0:
                block = fh.read(min(64 * 1024, remaining))
                if filename in m.faults.corrupt:
                    block = bytes(255 - x for x in block[:16]) + block[16:]
                if drop_at is not None and sent + len(block) > drop_at:
                    self.wfile.write(block[: max(0, drop_at - sent)])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                try:
                    self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    return
                sent += len(block)
                remaining -= len(block)
                if m.faults.bytes_per_s:
                    time.sleep(len(block) / m.faults.bytes_per_s)
