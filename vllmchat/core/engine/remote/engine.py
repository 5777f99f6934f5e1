"""An OpenAI-compatible server as the engine: llama.cpp's server, vLLM, Ollama, LM Studio.

Chat completions stream through the ``openai`` SDK (its SSE parsing, errors and
timeouts; no hand-written protocol code). Stop closes the stream, which makes
the server stop generating. The server keeps its own prompt cache: the
conversation is sent the same way every turn (a stable prefix), llama.cpp's
server is asked to cache the prompt, and what the server reports as reused
(``timings.cache_n`` or ``usage.prompt_tokens_details.cached_tokens``) becomes
the turn's ``tokens_reused``. There is no KV state to save or restore here.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionChunk

from vllmchat.core.engine.chat_options import PLAIN, ChatOptions
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    Event,
    StatsEvent,
    TokenEvent,
)
from vllmchat.core.engine.info import KvUsage, ModelInfo, ReloadResult, StateTransfer
from vllmchat.core.engine.protocol import Capabilities
from vllmchat.core.engine.remote.tools import StreamedCalls, openai_messages
from vllmchat.core.engine.remote.wire import (
    ReasoningText,
    api_root,
    engine_error,
    request_body,
    turn_stats,
)
from vllmchat.core.models.advisor import display_name
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.settings import LoadSettings, SamplingSettings

CHARS_PER_TOKEN = 3.5  # for the context budget where the server does not count for us
NO_STATE = "A remote server keeps its own cache; there is no KV state to save or load."


class RemoteEngine:
    """The ``Engine`` protocol over an OpenAI-compatible chat-completions server."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        n_ctx: int | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.url = api_root(url)
        self.model = model
        self.n_ctx_setting = n_ctx
        self._last_loaded: LoadSettings | None = None  # what restart() loads again
        self.capabilities = Capabilities()  # the server owns memory, placement and its cache
        self.info: ModelInfo | None = None
        self._client = openai.OpenAI(
            base_url=self.url,
            api_key=api_key or "not-needed",
            timeout=openai.Timeout(timeout_s, connect=5.0),
            max_retries=0,
        )
        self._stop = threading.Event()
        self._last = KvUsage(0, 0)
        self.last_timings: dict[str, Any] = {}  # llama.cpp's server's own figures, last turn

    # -- the server ---------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.info is not None

    def exit_reason(self) -> str | None:
        return None  # no process of ours to die; a failed request says what happened

    def _context_length(self, model: Any) -> int:
        extra = getattr(model, "model_extra", None) or {}
        meta = extra.get("meta") or {}
        for value in (extra.get("max_model_len"), meta.get("n_ctx")):  # vLLM, llama-server
            if isinstance(value, int) and value > 0:
                return value
        try:  # llama.cpp's server also tells its context on /props
            url = self.url.removesuffix("/v1") + "/props"
            with urllib.request.urlopen(url, timeout=5.0) as response:
                n_ctx = json.load(response)["default_generation_settings"]["n_ctx"]
            if isinstance(n_ctx, int) and n_ctx > 0:
                return int(n_ctx)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        trained = meta.get("n_ctx_train")  # an upper bound, not the server's context
        if self.n_ctx_setting:
            return self.n_ctx_setting
        if isinstance(trained, int) and trained > 0:
            return min(trained, self._last_loaded.n_ctx if self._last_loaded else trained)
        return self._last_loaded.n_ctx if self._last_loaded else 4096

    def models(self) -> list[str]:
        """The model names the server lists (``/v1/models``); raises ``EngineError``."""
        try:
            return [m.id for m in self._client.models.list()]
        except openai.OpenAIError as exc:
            raise engine_error(exc, self.url) from exc

    def load(self, settings: LoadSettings) -> ModelInfo:
        """Connect: list the server's models, pick ours, learn the context length
        (``settings.n_ctx`` where the server does not tell it)."""
        self._last_loaded = settings
        t0 = time.perf_counter()
        try:
            models = list(self._client.models.list())
        except openai.OpenAIError as exc:
            raise engine_error(exc, self.url) from exc
        names = [m.id for m in models]
        name = self.model or (names[0] if names else None)
        if name is None:
            raise EngineError(ErrorKind.SERVER_MODEL, f"{self.url} lists no models.")
        if names and name not in names:
            raise EngineError(
                ErrorKind.SERVER_MODEL, f"{self.url} serves {', '.join(names)}, not {name}."
            )
        self.model = name
        chosen = next((m for m in models if m.id == name), None)
        n_ctx = self._context_length(chosen)
        self.info = ModelInfo(
            path=f"{self.url}#{name}",
            architecture="remote",
            n_layer=0,
            n_ctx_train=n_ctx,
            n_ctx=n_ctx,
            n_vocab=0,
            n_params=0,
            size_bytes=0,
            n_swa=0,
            chat_template="server",
            template_source="server",
            gpu_offload=False,
            load_s=time.perf_counter() - t0,
            name=display_name(name) if name.endswith(".gguf") else name,
            reasoning="think",  # reasoning_content comes back in think tags
            tool_format="server",  # tools go through the API
        )
        return self.info

    def reload(self, settings: LoadSettings) -> ReloadResult:
        t0 = time.perf_counter()
        info = self.load(settings)
        reason = "the server keeps its own cache"
        return ReloadResult(info, True, 0, reason, time.perf_counter() - t0)

    def restart(self) -> ModelInfo | None:
        return self.load(self._last_loaded) if self._last_loaded is not None else None

    def close(self) -> None:
        self.info = None
        self._client.close()

    def probe(self) -> HardwareInfo:
        reason = "The model runs on a server, which owns its memory: offload does not apply."
        return HardwareInfo(0, 0, offload_reason=reason)

    # -- turns ----------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = PLAIN,
    ) -> Iterator[Event]:
        """Stream the reply as the local engine's events; failures end in an ``ErrorEvent``.

        ``options.tools`` go to the server as the API's ``tools``; its streamed calls end
        the reply as ``<tool_call>`` text (``remote_tools``). ``json_schema`` asks for a
        reply of that shape (``response_format``); ``grammar`` goes as llama.cpp's server
        takes it. Images are refused: a server is sent text only."""
        if self.info is None or self.model is None:
            yield ErrorEvent(ErrorKind.NO_MODEL, "Not connected to a server.")
            return
        if options.images:
            yield ErrorEvent(
                ErrorKind.NO_VISION,
                "A server engine is sent text only: images go to a local model.",
            )
            return
        sampling = sampling or SamplingSettings()
        self._stop.clear()
        text_of = ReasoningText()
        parts: list[str] = []
        t0 = time.perf_counter()
        t_first = t_last = 0.0
        reason, usage, timings = "", None, None
        calls = StreamedCalls()
        request = request_body(sampling, options)
        try:
            stream = cast(
                "openai.Stream[ChatCompletionChunk]",
                self._client.chat.completions.create(
                    model=self.model,
                    messages=openai_messages(messages),  # type: ignore[arg-type]
                    stream=True,
                    **request,
                ),
            )
            with stream:
                for chunk in stream:
                    if self._stop.is_set():
                        reason = "stopped"
                        break
                    usage = chunk.usage or usage
                    timings = (chunk.model_extra or {}).get("timings") or timings
                    for choice in chunk.choices:
                        calls.add(getattr(choice.delta, "tool_calls", None))
                        for piece in text_of.pieces(choice.delta):
                            t_last = time.perf_counter()
                            t_first = t_first or t_last
                            parts.append(piece)
                            yield TokenEvent(piece, -1)
                        if choice.finish_reason:
                            reason = {"stop": "eos", "length": "max_tokens"}.get(
                                choice.finish_reason, choice.finish_reason
                            )
        except openai.OpenAIError as exc:
            err = engine_error(exc, self.url)
            yield ErrorEvent(err.kind, err.message, partial_text="".join(parts))
            return
        except ValueError:  # an event that is not JSON
            message = f"{self.url} sent a malformed event."
            yield ErrorEvent(ErrorKind.SERVER_ERROR, message, partial_text="".join(parts))
            return
        except Exception as exc:  # the transport failed mid-stream (server killed, cut)
            message = f"{self.url} dropped the connection mid-reply ({type(exc).__name__})."
            yield ErrorEvent(ErrorKind.SERVER_UNREACHABLE, message, partial_text="".join(parts))
            return
        closing = text_of.close()
        if closing:
            parts.append(closing)
        called = calls.text()
        if called:
            parts.append(("\n" if parts else "") + called)
            reason = "eos" if reason == "tool_calls" else reason
        text = "".join(parts)
        if not reason:  # no finish_reason: the stream ended before the reply did
            yield self._unfinished(messages, text)
            return
        self.last_timings = dict(timings) if isinstance(timings, dict) else {}
        n_ctx = self.info.n_ctx if self.info else 0
        stats = turn_stats(usage, timings, reason, len(parts), n_ctx, (t0, t_first, t_last))
        self._last = KvUsage(stats.kv_tokens, n_ctx)
        yield StatsEvent(stats)
        yield DoneEvent(text, reason, stats)

    def _unfinished(self, messages: Sequence[Mapping[str, str]], text: str) -> ErrorEvent:
        """A stream that ended without a finish reason. Some servers (llama-cpp-python's)
        answer a prompt over their context with an empty stream instead of an error."""
        n_ctx = self.info.n_ctx if self.info else 0
        estimate = len(self.render(messages))
        if not text and n_ctx and estimate > 0.8 * n_ctx:
            message = (
                f"{self.url} ended the reply without a word: the prompt (about {estimate:,} "
                f"tokens) is probably too long for its context of {n_ctx:,}."
            )
            return ErrorEvent(ErrorKind.PROMPT_TOO_LONG, message)
        return ErrorEvent(
            ErrorKind.SERVER_UNREACHABLE,
            f"{self.url} cut the reply off before it ended.",
            partial_text=text,
        )

    # -- what the chat session asks of an engine --------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """An estimate (the context budget needs counts, not ids)."""
        return [0] * max(1, round(len(text) / CHARS_PER_TOKEN))

    def render(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        text = sum(len(m["content"]) for m in messages)
        return [0] * (round(text / CHARS_PER_TOKEN) + 8 * len(messages) + 4)

    def remember_replies(self, replies: Sequence[tuple[str, Sequence[int]]]) -> None:
        """Nothing to do: the server matches the prompt's text against its cache."""

    def kv(self) -> KvUsage:
        return self._last

    @property
    def pid(self) -> None:
        return None  # the model runs in the server's process

    def export_state(self, path: str) -> StateTransfer:
        raise EngineError(ErrorKind.NOT_REMOTE, NO_STATE)

    def import_state(self, path: str) -> StateTransfer:
        raise EngineError(ErrorKind.NOT_REMOTE, NO_STATE)
