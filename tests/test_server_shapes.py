"""Anthropic's, Ollama's and the Responses API's shapes, through their JSON as their
clients send it; and a client's KV state that outlives a restart of the app."""

from __future__ import annotations

import json
import urllib.request

import openai
import pytest

from tests.api_server import post, post_json, serving

USER = [{"role": "user", "content": "Name a color."}]


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _events(text: str) -> list[tuple[str, dict]]:
    """(event, data) of a server-sent event stream."""
    out, name = [], ""
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
            out.append((name, json.loads(data) if data != "[DONE]" else {}))
    return out


def test_anthropic_messages_answer_in_its_shape(served) -> None:
    body = {"model": "", "max_tokens": 8, "system": "Be brief.", "messages": USER}
    status, answer = post_json(
        served.url + "/v1/messages", body, {"anthropic-version": "2023-06-01"}
    )
    assert status == 200, answer
    assert answer["type"] == "message" and answer["role"] == "assistant"
    assert answer["content"][0]["type"] == "text" and answer["content"][0]["text"]
    assert answer["stop_reason"] in ("end_turn", "max_tokens")
    assert set(answer["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}
    status, _, text = post(
        served.url + "/v1/messages",
        json.dumps({**body, "stream": True}).encode(),
        {"Content-Type": "application/json"},
    )
    names = [name for name, _ in _events(text)]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    deltas = [d["delta"]["text"] for n, d in _events(text) if n == "content_block_delta"]
    assert "".join(deltas) == answer["content"][0]["text"]


def test_anthropic_errors_carry_both_shapes(served) -> None:
    status, answer = post_json(served.url + "/v1/messages", {"model": "", "messages": USER})
    assert (
        status == 400 and answer["type"] == "error" and "max_tokens" in answer["error"]["message"]
    )


def test_ollama_chat_generate_tags_and_version(served) -> None:
    status, _, text = post(
        served.url + "/api/chat",
        json.dumps({"model": "", "messages": USER, "options": {"num_predict": 6}}).encode(),
        {"Content-Type": "application/json"},
    )
    lines = [json.loads(line) for line in text.splitlines() if line]
    assert status == 200 and lines[-1]["done"] is True and not lines[0]["done"]
    assert "".join(x["message"]["content"] for x in lines)
    status, answer = post_json(
        served.url + "/api/generate",
        {
            "model": "",
            "prompt": "Why is the sky blue?",
            "stream": False,
            "options": {"num_predict": 5},
        },
    )
    assert status == 200 and answer["done"] and answer["response"]
    tags = _get(served.url + "/api/tags")
    assert tags["models"][0]["name"] == "SmolLM2-135M-Instruct.Q4_1"
    assert "version" in _get(served.url + "/api/version")


def test_responses_are_stateless(served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
    response = client.responses.create(model="", input="Name a color.", max_output_tokens=16)
    assert response.output_text and response.usage.input_tokens > 0
    with pytest.raises(openai.BadRequestError, match="keeps no responses"):
        client.responses.create(model="", input="more", previous_response_id=response.id)


def test_a_clients_state_outlives_a_restart(demo_model, tmp_path) -> None:
    system = "You are a careful assistant for a library. " * 30
    ask = [{"role": "system", "content": system}, {"role": "user", "content": "Hello."}]
    with serving(demo_model, folder=tmp_path) as first:
        client = openai.OpenAI(base_url=first.url + "/v1", api_key="x", max_retries=0)
        before = client.chat.completions.create(model="", messages=ask, max_tokens=6, user="ada")
    with serving(demo_model, folder=tmp_path) as second:
        client = openai.OpenAI(base_url=second.url + "/v1", api_key="x", max_retries=0)
        again = [
            *ask,
            {"role": "assistant", "content": before.choices[0].message.content},
            {"role": "user", "content": "And now?"},
        ]
        after = client.chat.completions.create(model="", messages=again, max_tokens=4, user="ada")
        states = second.service.states()
    assert after.usage.prompt_tokens_details.cached_tokens >= before.usage.prompt_tokens
    assert states is not None and any(s.key == "named-ada" for s in states.states)


def test_a_stop_string_ends_the_reply_there_and_its_state_is_still_kept(served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="x", max_retries=0)
    ask = [{"role": "user", "content": "Count from one to twenty, in words."}]
    whole = (
        client.chat.completions.create(
            model="", messages=ask, max_tokens=24, temperature=0, user="stopper-a"
        )
        .choices[0]
        .message.content
    )
    at = next(i for i in range(4, len(whole) - 2) if whole.find(whole[i : i + 2]) == i)
    stop = whole[at : at + 2]  # first seen mid-reply
    cut = client.chat.completions.create(
        model="", messages=ask, max_tokens=24, temperature=0, user="stopper-b", stop=[stop]
    )
    assert cut.choices[0].message.content == whole[: whole.find(stop)]
    assert cut.choices[0].finish_reason == "stop"
    states = served.service.states()
    assert states is not None and any(s.key == "named-stopper-b" for s in states.states)
