"""The local API with the real ``openai`` SDK as its client, on a real server on loopback
with the demo model in a real engine: chat streamed and not, tools, JSON Schema,
usage and cached tokens, completions, embeddings, and the SDK's typed errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import openai
import pytest

from tests.api_server import Served, serving

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def served(demo_model, engine_pool) -> Iterator[Served]:
    with serving(demo_model, embedding_model=str(demo_model)) as s:
        engine_pool.keep(s.pid)
        yield s


@pytest.fixture
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)


def _ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_models_lists_the_loaded_model_with_its_context(client) -> None:
    models = client.models.list().data
    assert models[0].id == "SmolLM2-135M-Instruct.Q4_1"
    assert models[0].model_extra["context_length"] == 8192
    assert models[0].model_extra["loaded"] is True


def test_chat_streamed_and_not_give_the_same_text_and_usage(client) -> None:
    whole = client.chat.completions.create(model="", messages=_ask("Name a fruit."), max_tokens=12)
    text = whole.choices[0].message.content
    assert text and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 0
    assert whole.usage.prompt_tokens_details.cached_tokens is not None
    chunks = list(
        client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1",
            messages=_ask("Name a fruit."),
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text  # greedy: the same reply
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.completion_tokens == whole.usage.completion_tokens
    # The same prompt again: all but the last prompt token come from the KV cache.
    assert usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 1


def test_a_returning_conversation_reads_only_its_new_tokens(client) -> None:
    history = [
        {"role": "system", "content": "You answer in short sentences. " * 40},
        {"role": "user", "content": "What is a cat?"},
    ]
    first = client.chat.completions.create(model="", messages=history, max_tokens=10)
    other = client.chat.completions.create(model="", messages=_ask("Something else."), max_tokens=4)
    # Another client took the context between the two turns.
    assert other.usage.prompt_tokens_details.cached_tokens < first.usage.prompt_tokens / 4
    history += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And a dog?"},
    ]
    again = client.chat.completions.create(model="", messages=history, max_tokens=4)
    assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens


def test_a_required_tool_call_round_trips(client) -> None:
    messages = _ask("What is the weather in Paris?")
    asked = client.chat.completions.create(
        model="", messages=messages, tools=[WEATHER], tool_choice="required", max_tokens=40
    )
    choice = asked.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert "city" in json.loads(call.function.arguments)
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"},
    ]
    answered = client.chat.completions.create(
        model="", messages=messages, tools=[WEATHER], tool_choice="none", max_tokens=20
    )
    assert answered.choices[0].finish_reason in ("stop", "length")
    assert answered.choices[0].message.content


def test_a_json_schema_answer_validates(client) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    reply = client.chat.completions.create(
        model="",
        messages=_ask("Describe a person."),
        max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


def test_completions_continue_the_text_without_a_template(client) -> None:
    done = client.completions.create(model="", prompt="One, two, three,", max_tokens=4)
    assert done.choices[0].text and done.usage.prompt_tokens < 10


def test_embeddings_come_from_the_embedding_model(client) -> None:
    out = client.embeddings.create(model="", input=["a cat", "a dog"])
    assert len(out.data) == 2 and len(out.data[0].embedding) > 100


def test_without_an_embedding_model_embeddings_are_a_clear_400(client, served) -> None:
    list(served.started.app.configure(embedding_model=""))
    try:
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(model="", input="a cat")
        assert caught.value.code == "no_embedding_model"
        assert "embedding_model" in caught.value.message
    finally:
        list(
            served.started.app.configure(
                embedding_model=str(served.started.app.settings.load.model_path)
            )
        )


@pytest.mark.parametrize(
    ("kwargs", "error", "code"),
    [
        ({"model": "gpt-4"}, openai.NotFoundError, "model_not_found"),
        ({"messages": []}, openai.BadRequestError, "invalid_request"),
        ({"max_tokens": 0}, openai.BadRequestError, "invalid_request"),
        ({"n": 2}, openai.BadRequestError, "invalid_request"),
        ({"temperature": 7}, openai.BadRequestError, "invalid_request"),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": 5}},
                }
            },
            openai.BadRequestError,
            "invalid_request",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
            openai.BadRequestError,
            "invalid_request",
        ),
        (
            {"messages": [{"role": "tool", "content": "x", "tool_call_id": "c1"}]},
            openai.BadRequestError,
            "invalid_request",
        ),
        (
            {"messages": [{"role": "robot", "content": "x"}]},
            openai.BadRequestError,
            "invalid_request",
        ),
        ({"messages": _ask("word " * 9000)}, openai.BadRequestError, "context_length_exceeded"),
    ],
)
def test_bad_requests_raise_the_sdks_typed_errors(client, kwargs, error, code) -> None:
    request = {"model": "", "messages": _ask("hi"), "max_tokens": 4, **kwargs}
    with pytest.raises(error) as caught:
        client.chat.completions.create(**request)
    assert caught.value.code == code
    assert caught.value.message  # said in words


def test_the_server_keeps_serving_after_bad_requests(client) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="", messages=[], max_tokens=4)
    ok = client.chat.completions.create(model="", messages=_ask("hi"), max_tokens=2)
    assert ok.choices[0].message.content is not None
