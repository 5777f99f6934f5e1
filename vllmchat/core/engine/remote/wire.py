"""What crosses to an OpenAI-compatible server and back, in the engine's terms.

A turn's request body (sampling, tools, a constrained reply), the SDK's errors as
the engine's, the streamed deltas as text with the reasoning in think tags, and the
server's usage and timings as the turn's stats.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import EngineError, ErrorKind, TurnStats
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.thinking import THINK_CLOSE, THINK_OPEN


def api_root(url: str) -> str:
    """The server's API root (``…/v1``)."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def engine_error(exc: Exception, server: str) -> EngineError:
    """A clear engine error for what the SDK raised (never the API key)."""
    if isinstance(exc, openai.APITimeoutError):
        return EngineError(ErrorKind.SERVER_TIMEOUT, f"{server} did not answer in time.")
    if isinstance(exc, openai.APIConnectionError):
        return EngineError(ErrorKind.SERVER_UNREACHABLE, f"Cannot reach {server}.")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return EngineError(
            ErrorKind.SERVER_AUTH, f"{server} refused the API key ({exc.status_code})."
        )
    if isinstance(exc, openai.NotFoundError):
        return EngineError(ErrorKind.SERVER_MODEL, f"{server} does not serve that model (404).")
    if isinstance(exc, openai.BadRequestError):
        text = str(exc.message)
        if "context" in text.lower() or "too long" in text.lower() or "exceed" in text.lower():
            return EngineError(ErrorKind.PROMPT_TOO_LONG, f"{server}: the prompt is too long.")
        return EngineError(ErrorKind.BAD_REQUEST, f"{server} refused the request: {text[:200]}")
    if isinstance(exc, openai.APIStatusError):
        return EngineError(ErrorKind.SERVER_ERROR, f"{server} failed ({exc.status_code}).")
    return EngineError(ErrorKind.SERVER_ERROR, f"{server}: {type(exc).__name__}: {exc}")


def request_body(sampling: SamplingSettings, options: ChatOptions) -> dict[str, Any]:
    """The chat-completions arguments for a turn (besides the model and messages)."""
    extra: dict[str, Any] = {
        "cache_prompt": True,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "repeat_penalty": sampling.repeat_penalty,
    }
    request: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,  # always: some servers would fill the context
        "stream_options": {"include_usage": True},
        "extra_body": extra,
    }
    if sampling.seed >= 0:
        request["seed"] = sampling.seed
    if not sampling.thinking:  # llama.cpp's server passes these to the template
        extra["chat_template_kwargs"] = {"enable_thinking": False}
    if sampling.ignore_eos:  # benchmarks: a fixed number of tokens (llama.cpp, vLLM)
        extra["ignore_eos"] = True
    if options.tools:
        request["tools"] = json.loads(options.tools)
    if options.json_schema:
        schema = {"name": "tool_call", "schema": json.loads(options.json_schema)}
        request["response_format"] = {"type": "json_schema", "json_schema": schema}
    if options.grammar:
        extra["grammar"] = options.grammar
    return request


class ReasoningText:
    """A stream's deltas as text; a server's separate ``reasoning_content`` (llama.cpp's,
    vLLM's) comes back inside think tags, as the session tells thinking apart from text."""

    def __init__(self) -> None:
        self.thinking = False  # inside a reasoning_content run of the stream

    def pieces(self, delta: Any) -> list[str]:
        """A delta's text pieces, think tags opened and closed where needed."""
        if delta is None:
            return []
        pieces = []
        reasoning = (delta.model_extra or {}).get("reasoning_content")
        if reasoning:
            if not self.thinking:
                self.thinking = True
                pieces.append(THINK_OPEN)
            pieces.append(reasoning)
        if delta.content:
            if self.thinking:
                self.thinking = False
                pieces.append(THINK_CLOSE)
            pieces.append(delta.content)
        return pieces

    def close(self) -> str:
        """The closing tag when the stream ended inside the reasoning, else nothing."""
        if not self.thinking:
            return ""
        self.thinking = False
        return THINK_CLOSE


def turn_stats(
    usage: Any,
    timings: Any,
    reason: str,
    pieces: int,
    n_ctx: int,
    times: tuple[float, float, float],
) -> TurnStats:
    """The turn's stats from the server's usage (and llama.cpp's ``timings``), with
    ``times`` (the request, the first piece, the last) as the caller saw them."""
    t0, t_first, t_last = times
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion = int(getattr(usage, "completion_tokens", 0) or pieces)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
        cached = timings["cache_n"]
    cached = int(cached or 0)
    return TurnStats(
        prompt_tokens=prompt,
        tokens_reused=cached,
        tokens_prefilled=max(0, prompt - cached),
        tokens_new=max(0, prompt - cached),
        prefill_s=(t_first or t_last) - t0,
        ttft_s=(t_first - t0) if t_first else 0.0,
        decode_tokens=completion,
        decode_s=t_last - t_first if t_first else 0.0,
        stop_reason=reason,
        n_ctx=n_ctx,
        kv_tokens=prompt + completion,
    )
