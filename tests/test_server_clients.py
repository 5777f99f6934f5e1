"""The local API through the real ``anthropic`` and ``ollama`` clients (and the
``openai`` SDK), on a real server on loopback with the demo model in a real engine:
Anthropic's token count, Ollama's ``show`` and ``ps``, and a body nested too deep to
parse, refused in each family's shape; the server serves on after each."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import anthropic
import ollama
import openai
import pytest

from tests.api_server import Served, post

MODEL = "SmolLM2-135M-Instruct.Q4_1"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def claude(served: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)


@pytest.fixture
def llama(served: Served) -> ollama.Client:
    return ollama.Client(host=served.url)


@pytest.fixture
def logged(served: Served) -> Iterator[list[logging.LogRecord]]:
    """What the server's loggers write meanwhile (uvicorn's keep to their own handlers,
    which its start set: these are added after it)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.error", "starlette")]
    for logger in loggers:
        logger.addHandler(handler)
    yield records
    for logger in loggers:
        logger.removeHandler(handler)


def _still_serving(served: Served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
    reply = client.chat.completions.create(model="", messages=ASK, max_tokens=2)
    assert reply.choices[0].message.content is not None


def test_count_tokens_is_what_the_messages_turn_reads(claude, served) -> None:
    request = {"model": MODEL, "system": "Be brief.", "messages": ASK, "tools": [WEATHER]}
    counted = claude.messages.count_tokens(**request)
    answered = claude.messages.create(max_tokens=4, **request)
    usage = answered.usage
    assert counted.input_tokens == usage.input_tokens + usage.cache_read_input_tokens
    plain = claude.messages.count_tokens(model=MODEL, messages=ASK)
    bare = claude.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    # The system prompt and the tool's schema are counted; a longer question takes more.
    assert bare.input_tokens < plain.input_tokens < counted.input_tokens
    assert plain.input_tokens == claude.messages.count_tokens(model="", messages=ASK).input_tokens
    _still_serving(served)


def test_count_tokens_refusals_are_the_sdks_typed_errors(claude, served) -> None:
    with pytest.raises(anthropic.NotFoundError, match="does not exist"):
        claude.messages.count_tokens(model="claude-sonnet-4-5", messages=ASK)
    with pytest.raises(anthropic.BadRequestError, match="messages"):
        claude.messages.count_tokens(model=MODEL, messages=[])
    assert claude.messages.count_tokens(model=MODEL, messages=ASK).input_tokens > 0


def test_ollama_show_tells_context_template_and_capabilities(llama, served) -> None:
    shown = llama.show(MODEL)
    assert shown.modelinfo is not None and shown.details is not None
    assert shown.modelinfo["llama.context_length"] == 8192
    assert shown.modelinfo["general.architecture"] == "llama"
    assert shown.modelinfo["general.parameter_count"] > 100_000_000
    assert "<|im_start|>" in (shown.template or "")
    assert shown.capabilities is not None and "completion" in shown.capabilities
    assert shown.details.format == "gguf" and shown.details.family == "llama"
    assert shown.details.quantization_level == "Q4_1"
    assert shown.details.parameter_size == "135M"
    assert re.search(r"^num_ctx\s+4096$", shown.parameters or "", re.MULTILINE)
    assert f"FROM {served.started.app.settings.load.model_path}" in (shown.modelfile or "")
    assert shown.modified_at is not None
    assert llama.show(MODEL + ".gguf").modelinfo == shown.modelinfo  # by its file's name too
    with pytest.raises(ollama.ResponseError) as caught:
        llama.show("llama3.2:latest")
    assert caught.value.status_code == 404 and "does not exist" in caught.value.error
    _still_serving(served)


def test_ollama_ps_lists_the_loaded_model(llama, served) -> None:
    models = llama.ps().models
    assert [m.model for m in models] == [MODEL] and models[0].name == MODEL
    loaded = models[0]
    assert loaded.context_length == 4096
    assert loaded.size is not None and loaded.size > 50_000_000
    assert loaded.size_vram is not None and 0 <= loaded.size_vram <= loaded.size
    assert loaded.expires_at is not None and loaded.expires_at.year > 2100  # kept loaded
    assert re.fullmatch(r"[0-9a-f]{64}", loaded.digest or "")
    assert loaded.details is not None and loaded.details.family == "llama"
    tags = llama.list().models
    assert tags[0].model == MODEL
    _still_serving(served)


DEEP = b"[" * 100_000 + b"]" * 100_000
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("path", "error_of"),
    [
        ("/v1/chat/completions", lambda body: body["error"]),
        ("/v1/responses", lambda body: body["error"]),
        ("/v1/messages", lambda body: body["type"] == "error" and body["error"]),
        ("/v1/messages/count_tokens", lambda body: body["type"] == "error" and body["error"]),
        ("/api/chat", lambda body: {"message": body["error"], "code": "json_too_deep"}),
        ("/api/show", lambda body: {"message": body["error"], "code": "json_too_deep"}),
    ],
)
def test_a_body_nested_too_deep_is_a_400_in_its_familys_shape(
    served, logged, path, error_of
) -> None:
    status, _, text = post(served.url + path, DEEP, JSON)
    error = error_of(json.loads(text))
    assert status == 400 and error["code"] == "json_too_deep", text
    assert "128 levels" in error["message"]
    assert not [r for r in logged if r.exc_info or "RecursionError" in r.getMessage()]
    _still_serving(served)


def test_a_body_within_the_depth_limit_is_read(served) -> None:
    ask = {"model": "", "max_tokens": 2}
    deep = json.dumps({**ask, "messages": [{"role": "user", "content": "hi"}]})
    nested = '{"x": ' * 126 + "1" + "}" * 126
    body = deep[:-1] + ', "metadata": ' + nested + "}"
    status, _, text = post(served.url + "/v1/chat/completions", body.encode(), JSON)
    assert status == 200, text
    brackets_in_text = json.dumps({**ask, "messages": [{"role": "user", "content": "[" * 500}]})
    status, _, text = post(served.url + "/v1/chat/completions", brackets_in_text.encode(), JSON)
    assert status == 200, text


@pytest.mark.parametrize(
    ("body", "deeper"),
    [
        (b"[" * 129 + b"]" * 129, True),
        (b"[" * 128 + b"]" * 128, False),
        (b"[" * 100_000, True),  # never closed: json would recurse all the same
        (b'["' + b"[" * 500 + b'"]', False),  # in a string
        (b'["\\"' + b"[" * 500 + b'"]', False),  # after an escaped quote, still in it
        (b'["\\\\", ' + b"[" * 200 + b"]" * 200 + b"]", True),  # an escaped backslash ends
        (json.dumps([[[["x"]]]] * 1000).encode(), False),  # wide, not deep
        (json.dumps(json.loads(b"[" * 129 + b"]" * 129)).encode("utf-16"), True),
    ],
)
def test_the_depth_is_measured_outside_strings(body, deeper) -> None:
    from vllmchat.server.json_depth import nests_deeper

    assert nests_deeper(body, 128) is deeper
