"""OpenAI's chat request, read and checked into the application's ``ApiChat``.

Every fault is an ``ApiError`` naming the field: an unknown role or an impossible
order, a content part that is not text or a data-URL image, sampling values out of
range, ``n`` > 1, an invalid JSON Schema or tool. Lone surrogates become U+FFFD and
NUL bytes are dropped, so no text reaches the tokenizer that it cannot take.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from vllmchat.core.app.serving.api_tools import (
    OfferedTools,
    ToolsRefused,
    call_text,
    offered_tools,
)
from vllmchat.core.app.serving.api_turn import ApiChat
from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.images import MEDIA_MARKER
from vllmchat.core.settings import SamplingSettings
from vllmchat.server.errors import ApiError, bad_request

ROLES = {"system", "developer", "user", "assistant", "tool"}
IMAGE_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM")


def clean_text(value: Any, where: str) -> str:
    """A text field as text the tokenizer takes (lone surrogates replaced, NULs gone)."""
    if not isinstance(value, str):
        raise bad_request(f"{where} must be a string.", where)
    text: str = value
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text.replace("\x00", "")


def image_of(url: Any, where: str) -> bytes:
    """The bytes of a data-URL image; remote URLs are refused (nothing is fetched)."""
    if isinstance(url, dict):
        url = url.get("url")
    if not isinstance(url, str) or not url.startswith("data:"):
        raise bad_request(
            f"{where} must be a data URL (data:image/png;base64,...): this server fetches "
            "nothing from the network.",
            where,
        )
    head, _, data = url.partition(",")
    if not head.startswith("data:image/") or ";base64" not in head:
        raise bad_request(f"{where} is not a base64 image data URL.", where, "invalid_image")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise bad_request(f"{where} is not valid base64.", where, "invalid_image") from exc
    webp = raw[:4] == b"RIFF" and raw[8:12] == b"WEBP"
    if not (raw.startswith(IMAGE_MAGIC) or webp):
        raise bad_request(
            f"{where} is not a PNG, JPEG, GIF, WebP or BMP image.", where, "invalid_image"
        )
    return raw


def _content(content: Any, where: str, images: list[bytes]) -> str:
    """A message's content as text, its images replaced by markers (in order)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return clean_text(content, where)
    if not isinstance(content, list):
        raise bad_request(f"{where} must be a string or a list of parts.", where)
    texts = []
    for n, part in enumerate(content):
        at = f"{where}[{n}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text"):
            texts.append(clean_text(part.get("text"), f"{at}.text"))
        elif kind in ("image_url", "input_image"):
            images.append(image_of(part.get("image_url"), f"{at}.image_url"))
            texts.append(MEDIA_MARKER)
        else:
            raise bad_request(f"{at} has the type {kind!r}; text and image_url are supported.", at)
    return "\n".join(texts)


def read_messages(
    raw: Any, tool_format: str, offered: OfferedTools
) -> tuple[list[dict[str, str]], list[bytes]]:
    """Messages as the engine takes them, and their images; the order is checked."""
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list.", "messages")
    images: list[bytes] = []
    out: list[dict[str, str]] = []
    call_names: dict[str, str] = {}
    for n, m in enumerate(raw):
        at = f"messages[{n}]"
        if not isinstance(m, dict):
            raise bad_request(f"{at} must be an object.", at)
        role = m.get("role")
        if role not in ROLES:
            raise bad_request(
                f"{at}.role is {role!r}; it must be one of {sorted(ROLES)}.", f"{at}.role"
            )
        text = _content(m.get("content"), f"{at}.content", images)
        if role == "developer":
            role = "system"
        if role == "system" and any(o["role"] != "system" for o in out):
            raise bad_request(f"{at}: a system message must come before the conversation.", at)
        if role == "assistant" and m.get("tool_calls"):
            calls = m["tool_calls"]
            if not isinstance(calls, list):
                raise bad_request(f"{at}.tool_calls must be a list.", f"{at}.tool_calls")
            for call in calls:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    call_names[str(call.get("id", ""))] = str(call["function"].get("name", ""))
            text = (text + "\n" if text else "") + call_text(calls, tool_format)
        if role == "tool":
            if not out or out[-1]["role"] not in ("assistant", "tool") or not call_names:
                raise bad_request(
                    f"{at}: a tool message must answer an assistant's tool_calls.", at
                )
            call_id = str(m.get("tool_call_id", ""))
            name = call_names.get(call_id, "")
            if not name:
                raise bad_request(
                    f"{at}.tool_call_id {call_id!r} names no call made before.",
                    f"{at}.tool_call_id",
                )
            if tool_format:
                out.append({"role": "tool", "content": text, "tool_call_id": call_id, "name": name})
            else:
                said = f"Result of {name}:\n{text}\n\nAnswer in plain text with this result."
                out.append({"role": "user", "content": said})
            continue
        out.append({"role": role, "content": text})
    if out[-1]["role"] == "assistant":
        raise bad_request(
            "The last message must be the user's (or a tool's result), not the assistant's.",
            "messages",
        )
    if offered.active and not tool_format:
        described = offered.system_text()
        if out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + described}
        else:
            out.insert(0, {"role": "system", "content": described})
    return out, images


def _number(body: Mapping[str, Any], name: str, lo: float, hi: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise bad_request(f"'{name}' must be a number from {lo:g} to {hi:g}.", name)
    return float(value)


def read_sampling(body: Mapping[str, Any], base: SamplingSettings, n_ctx: int) -> SamplingSettings:
    """The request's sampling over the app's own settings; ``max_tokens`` capped at the context."""
    changes: dict[str, Any] = {}
    for name, lo, hi in (
        ("temperature", 0, 2),
        ("top_p", 0, 1),
        ("min_p", 0, 1),
        ("repeat_penalty", 0, 10),
    ):
        value = _number(body, name, lo, hi)
        if value is not None:
            changes[name] = value
    for name in ("top_k", "seed"):
        value = body.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad_request(f"'{name}' must be an integer.", name)
            changes[name] = value
    limit_name = (
        "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    )
    limit = body.get(limit_name)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise bad_request(f"'{limit_name}' must be a positive integer.", limit_name)
        changes["max_tokens"] = min(limit, max(n_ctx, 1))
    ignore_eos = body.get("ignore_eos")  # llama-server's: the reply runs to max_tokens
    if ignore_eos is not None:
        if not isinstance(ignore_eos, bool):
            raise bad_request("'ignore_eos' must be true or false.", "ignore_eos")
        changes["ignore_eos"] = ignore_eos
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        changes["thinking"] = kwargs["enable_thinking"]
    return replace(base, **changes)


def read_stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if (
        not isinstance(stops, list)
        or len(stops) > 4
        or not all(isinstance(s, str) and s for s in stops)
    ):
        raise bad_request("'stop' must be a string or a list of up to 4 non-empty strings.", "stop")
    return tuple(clean_text(s, "stop") for s in stops)


def read_schema(body: Mapping[str, Any]) -> str | None:
    """The JSON Schema a ``response_format`` asks the reply to fit."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise bad_request(
            "'response_format.type' must be text, json_object or json_schema.", "response_format"
        )
    if fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return json.dumps({"type": "object"})
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise bad_request(
            "'response_format.json_schema.schema' must be a JSON Schema object.", "response_format"
        )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise bad_request(
            f"The response_format schema is not valid: {exc.message}", "response_format"
        ) from exc
    return json.dumps(schema)


def client_name(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The name a client gives its state: ``prompt_cache_key``, ``user`` or a header."""
    for value in (
        body.get("prompt_cache_key"),
        body.get("user"),
        headers.get("x-client-id"),
        headers.get("x-session-id"),
    ):
        if isinstance(value, str) and value.strip():
            return (
                "named-"
                + "".join(c if c.isalnum() or c in "-_." else "_" for c in value.strip())[:64]
            )
    return None


def read_chat(
    body: Any,
    headers: Mapping[str, str],
    *,
    base: SamplingSettings,
    n_ctx: int,
    tool_format: str,
    label: str,
) -> ApiChat:
    """An OpenAI chat request as an ``ApiChat``."""
    if not isinstance(body, dict):
        raise bad_request("The body must be a JSON object.")
    n = body.get("n", 1)
    if n != 1:
        raise bad_request(
            "'n' must be 1: this server writes one answer per request; send n requests.", "n"
        )
    try:
        offered = offered_tools(body.get("tools"), body.get("tool_choice"))
    except ToolsRefused as exc:
        raise bad_request(str(exc), "tools") from exc
    messages, images = read_messages(body.get("messages"), tool_format, offered)
    schema = read_schema(body)
    call_schema = offered.call_schema()
    if call_schema is not None and schema is not None:
        raise bad_request(
            "A required tool call and a response_format cannot both hold the reply.",
            "response_format",
        )
    options = ChatOptions(
        images=tuple(images),
        tools=json.dumps(list(offered.tools)) if offered.active and tool_format else None,
        json_schema=json.dumps(call_schema) if call_schema is not None else schema,
    )
    return ApiChat(
        tuple(messages),
        read_sampling(body, base, n_ctx),
        options,
        offered,
        client_name(body, headers),
        read_stop(body),
        label,
    )


def require_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "The body must be a JSON object.")
    return body
