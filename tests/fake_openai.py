"""A loopback server for what real servers cannot be made to do on demand.

It lists one model and answers chat completions the way it is told: a status
code (401, 404, 500, ...), a stream that stalls before its first event, a
malformed event, or a stream cut after a few tokens.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeServer:
    def __init__(self) -> None:
        self.mode = "ok"
        self.script: list[str] = []  # mode "script": these answers, one per request, in order
        self.requests: list[dict[str, Any]] = []
        self.reasoning = ""  # sent first as reasoning_content, as llama.cpp's server does
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests.append(json.loads(body or b"{}"))
                mode = fake.mode
                if mode == "500-text":  # llama-cpp-python's server: a plain-text error
                    body = b"Internal Server Error"
                    self.send_response(500)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if mode.isdigit():
                    self._json(int(mode), {"error": {"message": f"fake {mode}", "code": int(mode)}})
                    return
                if mode == "stall":
                    time.sleep(10)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if mode == "malformed":
                    self.wfile.write(b"data: {not json\n\n")
                    return
                words: tuple[str, ...] = ("Once", " upon", " a", " time")
                if mode == "script":
                    answer = fake.script.pop(0) if fake.script else ""
                    words = tuple(answer[i : i + 8] for i in range(0, len(answer), 8))
                if fake.reasoning:
                    chunk = {
                        "id": "1",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "fake",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": None,
                                "delta": {"reasoning_content": fake.reasoning},
                            }
                        ],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                for word in words:
                    chunk = {
                        "id": "1",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "fake",
                        "choices": [
                            {"index": 0, "delta": {"content": word}, "finish_reason": None}
                        ],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                if mode == "cut":
                    self.wfile.write(b'data: {"id": "1", "obj')  # then the connection closes
                    return
                end = {
                    "id": "1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "fake",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())

        return Handler
