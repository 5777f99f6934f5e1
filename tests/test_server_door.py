"""The API's door and its hostile input, through raw HTTP on a real server: malformed or
oversized bodies, slow uploads, keys, hosts and origins, hostile bytes; a client that
leaves mid-stream; 100 requests at once. Each is answered in OpenAI's error shape and
the server goes on serving."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import re
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import openai
import pytest

from tests.api_server import Served, post, post_json, serving

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def served(demo_model, engine_pool) -> Iterator[Served]:
    with serving(demo_model, body_timeout_s=1.0) as s:
        engine_pool.keep(s.pid)
        yield s


def _ask(text: str, **more: object) -> dict[str, object]:
    return {"model": "", "messages": [{"role": "user", "content": text}], "max_tokens": 4, **more}


def _error(status: int, body: object) -> dict[str, object]:
    assert isinstance(body, dict) and set(body["error"]) >= {"message", "type", "code"}, body
    return body["error"]


def test_malformed_json_and_a_wrong_content_type(served) -> None:
    status, _, text = post(served.url + CHAT, b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and _error(status, json.loads(text))["code"] == "invalid_json"
    status, _, text = post(served.url + CHAT, b"hello", {"Content-Type": "text/plain"})
    assert status == 415 and "JSON" in _error(status, json.loads(text))["message"]


def _raw(served: Served, head: bytes, body: bytes = b"") -> str:
    port = urlparse(served.url).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head + body)
        answer = b""
        while True:  # the head and the body may come in separate packets
            piece = s.recv(65536)
            answer += piece
            top, _, rest = answer.partition(b"\r\n\r\n")
            length = re.search(rb"content-length: *(\d+)", top, re.IGNORECASE)
            if not piece or (length and len(rest) >= int(length.group(1))):
                return answer.decode()


def test_an_oversized_body_is_refused_before_it_is_read(served) -> None:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 22020096\r\n\r\n"
    )
    answer = _raw(served, head)
    assert answer.startswith("HTTP/1.1 413") and "request_too_large" in answer
    chunked = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"%x\r\n%s\r\n" % (1 << 20, b"a" * (1 << 20))
    answer = _raw(served, chunked, piece * 21)
    assert answer.startswith("HTTP/1.1 413"), answer[:60]


def test_a_slow_upload_is_cut_off(served) -> None:
    port = urlparse(served.url).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mo'
        )
        answer = s.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 408"), answer[:80]


def test_a_foreign_host_or_origin_is_refused(served) -> None:
    port = urlparse(served.url).port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/v1/models", headers={"Host": "evil.example"})
    r = conn.getresponse()
    assert r.status == 403 and _error(403, json.loads(r.read()))["code"] == "host_not_allowed"
    conn.request("GET", "/v1/models", headers={"Origin": "http://evil.example"})
    r = conn.getresponse()
    assert r.status == 403 and _error(403, json.loads(r.read()))["code"] == "origin_not_allowed"
    conn.request("GET", "/v1/models", headers={"Host": f"localhost:{port}"})
    assert conn.getresponse().status == 200


def test_hostile_bytes_reach_the_model_as_text(served) -> None:
    raw = (
        '{"model": "", "max_tokens": 3, '
        '"messages": [{"role": "user", "content": "a\\ud800b\\u0000c"}]}'
    )
    status, _, text = post(served.url + CHAT, raw.encode(), {"Content-Type": "application/json"})
    assert status == 200, text
    status, body = post_json(
        served.url + CHAT,
        {
            "model": "",
            "max_tokens": 3,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/png;base64,aGVsbG8="},
                        },
                    ],
                }
            ],
        },
    )
    assert status == 400 and _error(status, body)["code"] == "invalid_image"


def test_streamed_multibyte_text_is_never_broken(served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
    ask = [{"role": "user", "content": "Write 안녕하세요 and 😀 three times."}]
    chunks = [
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model="", messages=ask, max_tokens=40, stream=True)
        if c.choices
    ]
    whole = client.chat.completions.create(model="", messages=ask, max_tokens=40)
    assert "\ufffd" not in "".join(chunks)
    assert "".join(chunks) == whole.choices[0].message.content


def test_a_client_that_leaves_mid_stream_frees_the_model_at_once(served) -> None:
    logged: list = []
    unsubscribe = served.service.log.subscribe(logged.append)
    port = urlparse(served.url).port
    body = json.dumps(_ask("Count from one to five hundred.", max_tokens=400, stream=True))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", CHAT, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    r.fp.readline()  # the first event: the turn is under way
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    t0 = time.monotonic()
    queue = served.started.app.engine_queue
    while queue.snapshot().running is not None and time.monotonic() - t0 < 5:
        time.sleep(0.005)
    freed = time.monotonic() - t0
    assert queue.snapshot().running is None
    assert freed < 2.0  # far less than the 400 tokens it was asked for
    status, _ = post_json(served.url + CHAT, _ask("hi"))
    assert status == 200
    unsubscribe()
    left = [r for r in logged if r.status == 499]
    assert len(left) == 1 and left[0].what == "POST " + CHAT
    assert left[0].note.startswith("The client left") and "s after it asked" in left[0].note


def test_a_client_that_leaves_before_its_first_token_is_logged(served) -> None:
    """It left while its long prompt was read: the turn stops, the log says so."""
    logged: list = []
    unsubscribe = served.service.log.subscribe(logged.append)
    port = urlparse(served.url).port
    story = "Lighthouses, ships and the sea at night. " * 120  # about 1,100 tokens
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST", CHAT, json.dumps(_ask(story, stream=True)), {"Content-Type": "application/json"}
    )
    time.sleep(0.3)  # its prompt is being read: nothing has been answered yet
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    t0 = time.monotonic()
    while not any(r.status == 499 for r in logged) and time.monotonic() - t0 < 10:
        time.sleep(0.02)
    unsubscribe()
    left = [r for r in logged if r.status == 499]
    assert len(left) == 1 and "before its first token" in left[0].note, logged
    assert post_json(served.url + CHAT, _ask("hi"))[0] == 200


def test_a_hundred_requests_at_once_are_served_or_told_to_retry(served) -> None:
    def one(n: int) -> tuple[int, dict]:
        status, headers, text = post(
            served.url + CHAT,
            json.dumps(_ask(f"Say {n}.", max_tokens=1)).encode(),
            {"Content-Type": "application/json"},
        )
        return status, {**headers, "body": text}

    with concurrent.futures.ThreadPoolExecutor(100) as pool:
        answers = list(pool.map(one, range(100)))
    statuses = [s for s, _ in answers]
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(200) >= 17  # the queue's 16 and the one running, at least
    for status, headers in answers:
        if status == 429:
            retry = {k.lower(): v for k, v in headers.items()}["retry-after"]
            assert int(retry) >= 1
            assert json.loads(headers["body"])["error"]["code"] == "queue_full"
    assert post_json(served.url + CHAT, _ask("hi"))[0] == 200


def test_a_key_is_asked_and_compared(demo_model, served) -> None:
    from vllmchat.server.runner import ApiServer, ServerStartFailed

    with pytest.raises(ServerStartFailed, match="API key"):
        ApiServer(served.service, "0.0.0.0", 0)
    guarded = ApiServer(served.service, "127.0.0.1", 0, key="sesame-123")
    guarded.start()
    logged: list = []
    stop_listening = served.service.log.subscribe(logged.append)
    try:
        url = guarded.address.url + "/v1"
        for key in ("", "wrong"):
            client = openai.OpenAI(base_url=url, api_key=key or "none", max_retries=0)
            with pytest.raises(openai.AuthenticationError):
                client.models.list()
        assert post_json(guarded.address.url + CHAT, _ask("hi"))[0] == 401
        assert any(r.status == 401 and r.what == "POST " + CHAT for r in logged)  # the log shows it
        good = openai.OpenAI(base_url=url, api_key="sesame-123", max_retries=0)
        assert good.models.list().data
        status, _ = post_json(
            guarded.address.url + "/v1/messages",
            {"model": "", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]},
            {"x-api-key": "sesame-123"},
        )
        assert status == 200
    finally:
        stop_listening()
        guarded.stop()


def test_nothing_writes_pulls_or_deletes(served) -> None:
    for path in ("/api/pull", "/api/create", "/api/delete", "/api/push", "/api/copy"):
        status, body = post_json(served.url + path, {"model": "x"})
        assert status in (404, 405) and _error(status, body)
