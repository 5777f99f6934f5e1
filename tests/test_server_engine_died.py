"""The API after its engine process was killed: the request in flight is told why,
and the next one loads the model again in a new process and is answered."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.api_server import post_json, serving

CHAT = "/v1/chat/completions"


def _ask(k: int) -> dict[str, object]:
    messages = [{"role": "user", "content": f"Client {k}: name a river."}]
    return {"model": "", "messages": messages, "max_tokens": 4, "user": f"client-{k}"}


def test_the_next_request_after_a_killed_engine_is_answered(demo_model: Path) -> None:
    with serving(demo_model) as served:
        status, body = post_json(served.url + CHAT, _ask(1))
        assert status == 200, body
        dead = served.pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while served.started.app.engine.exit_reason() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        for k in (2, 3):  # each in its turn, in the new process
            status, body = post_json(served.url + CHAT, _ask(k))
            assert status == 200, body
            assert body["choices"][0]["message"]["content"]
        assert served.pid not in (None, dead)
