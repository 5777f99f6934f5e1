"""The one object a caller uses to talk to the engine process.

The model lives in a child process: a crash, abort, out-of-memory kill or
SIGKILL there becomes an ``ErrorEvent`` / ``EngineError(ENGINE_DIED)`` here,
never a crash of the caller. Requests are served one at a time; callers
from several threads queue on a lock. ``stop()`` may be called from any thread.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from vllmchat.core.engine import requests as rq
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
from vllmchat.core.engine.images import ImageInput
from vllmchat.core.engine.info import (
    KvUsage,
    ModelInfo,
    ProcessMemory,
    ReloadResult,
    ScoreRequest,
    SpeedSample,
    StateTransfer,
    TextScore,
)
from vllmchat.core.engine.protocol import LOCAL, Capabilities
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.settings import LoadSettings, SamplingSettings

_POLL_S = 0.05
VISION = replace(LOCAL, vision=True)
ReplyT = TypeVar("ReplyT")


_SIGNALS = {  # by name: Windows has neither SIGKILL nor SIGBUS
    "SIGKILL": "it was killed (SIGKILL; the system may have run out of memory)",
    "SIGSEGV": "it crashed (segmentation fault)",
    "SIGABRT": "it aborted (llama.cpp assertion or out of memory)",
    "SIGBUS": "it crashed (bus error: was the model file changed or removed?)",
}


def describe_exit(exitcode: int | None) -> str:
    """Human words for how the engine process ended."""
    if exitcode is None:
        return "The engine stopped answering."
    if exitcode < 0:
        sig = -exitcode
        name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
        return f"The engine process ended: {_SIGNALS.get(name, f'it got {name}')}."
    return f"The engine process exited with code {exitcode}."


class EngineClient:
    """Start, load, chat with, reload and restart the engine process.

    Every operation is a typed request (``requests``) sent with ``call``; the
    methods below are the ones callers name, each one line over ``call``.
    """

    def __init__(
        self, *, memory_limit: int | None = None, handler_modules: Sequence[str] = ()
    ) -> None:
        """``memory_limit``: cap on the engine process's address space, in bytes (where
        the system has one); ``handler_modules``: modules the engine process imports
        for the operations they register (``@handles``)."""
        self.memory_limit = memory_limit
        self.handler_modules = tuple(handler_modules)
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self._ids = itertools.count(1)
        self._request_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._current: int | None = None
        self._held: rq.LoadedModel | None = None  # the model loaded, and its settings
        self.last_error: EngineError | None = None

    @property
    def capabilities(self) -> Capabilities:
        """A local engine's capabilities; ``vision`` while the model has a projector."""
        info = self.info
        return VISION if info is not None and info.vision else LOCAL

    @property
    def info(self) -> ModelInfo | None:
        """The model the engine holds (None before a load, after a failed one, after close)."""
        return self._held.info if self._held is not None else None

    # -- process ------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def exit_reason(self) -> str | None:
        """How the engine process ended (None while it runs or before it started)."""
        if self._proc is None or self._proc.is_alive():
            return None
        return describe_exit(self._proc.exitcode)

    def start(self) -> None:
        """Start the engine process if it is not running."""
        if self.alive:
            return
        from vllmchat.core.engine.process.serving.entry import engine_main

        self._discard_process()
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=engine_main,
            args=(child, self.memory_limit, self.handler_modules),
            daemon=True,
            name="vllmchat-engine",
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent

    def _discard_process(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(timeout=5)
        self._proc = self._conn = None

    def close(self) -> None:
        """End the engine process (its model is gone: ``info`` is None)."""
        if self.alive:
            try:
                self._send(rq.Exit())
                self._proc.join(timeout=5)
            except (OSError, EngineError):
                pass
        self._discard_process()
        self._held = None

    def restart(self) -> ModelInfo | None:
        """A fresh engine process, loaded with the settings of the model it held (if any:
        after a crash or kill, not after ``close``)."""
        held = self._held
        with self._request_lock:
            self._discard_process()
        self.start()
        if held is not None:
            return self.load(held.settings)
        return None

    def kill(self) -> None:
        """SIGKILL the engine process (what a crash looks like)."""
        if self._proc is not None:
            self._proc.kill()

    # -- wire -----------------------------------------------------------------
    def _send(self, message: object) -> None:
        if self._conn is None:
            raise EngineError(ErrorKind.ENGINE_DIED, "The engine is not running.")
        try:
            with self._send_lock:
                self._conn.send(message)
        except (OSError, ValueError) as exc:
            raise self._died() from exc

    def _died(self) -> EngineError:
        proc = self._proc
        if proc is not None:
            proc.join(timeout=2)
        err = EngineError(
            ErrorKind.ENGINE_DIED, describe_exit(proc.exitcode if proc is not None else None)
        )
        self.last_error = err
        return err

    def _recv(self) -> Any:
        while True:
            try:
                if self._conn.poll(_POLL_S):
                    message = self._conn.recv()
                    return message
            except (EOFError, OSError) as exc:
                raise self._died() from exc
            if not self._proc.is_alive():
                try:
                    if self._conn.poll(0):
                        last = self._conn.recv()
                        return last
                except (EOFError, OSError):
                    pass
                raise self._died()

    def _require_alive(self) -> None:
        if not self.alive:
            raise (
                self._died()
                if self._proc is not None
                else EngineError(ErrorKind.ENGINE_DIED, "The engine is not running.")
            )

    def call(self, request: rq.Request[ReplyT]) -> ReplyT:
        """Send ``request`` to the engine process and return its reply (the type the
        request declares); a failure there raises its ``EngineError`` here."""
        if request.streams:
            raise TypeError(f"{type(request).__name__} streams events: use chat()")
        if request.starts:
            self.start()
        with self._request_lock:  # calls from several threads queue here
            self._require_alive()
            if request.changes_model:
                self._held = None  # the engine lets its model go first
            reply: ReplyT = self._answer(request)
            self._held = request.held(self._held, reply)
            return reply

    def _answer(self, request: rq.Request[Any]) -> Any:
        rid = next(self._ids)
        if request.stoppable:
            self._current = rid
        try:
            self._send(rq.Call(rid, request))
            while True:
                message = self._recv()
                if isinstance(message, rq.Failure) and message.rid in (rid, rq.UNREAD):
                    raise message.error
                if isinstance(message, rq.Reply) and message.rid == rid:
                    return message.value
        finally:
            if request.stoppable:
                self._current = None

    # -- requests ---------------------------------------------------------------
    def load(self, settings: LoadSettings) -> ModelInfo:
        """Load a model (starting the process if needed)."""
        return self.call(rq.Load(settings))

    def reload(self, settings: LoadSettings) -> ReloadResult:
        """Load with new settings, keeping the conversation's KV state where possible."""
        return self.call(rq.Reload(settings))

    def export_state(self, path: str) -> StateTransfer:
        """Write the KV state (llama.cpp's bytes and the token ids) to ``path``."""
        return self.call(rq.ExportState(str(path)))

    def checkpoint(self, path: str) -> StateTransfer:
        """Like ``export_state``, but the file is written while the engine goes on."""
        return self.call(rq.Checkpoint(str(path)))

    def import_state(self, path: str) -> StateTransfer:
        """Restore a KV state written by ``export_state`` (refused when it does not match)."""
        return self.call(rq.ImportState(str(path)))

    def remember_replies(self, replies: Sequence[tuple[str, Sequence[int]]]) -> None:
        """Tell the engine the sampled ids of earlier replies (after a restart or reopen)."""
        pairs = [(text, list(ids)) for text, ids in replies if ids]
        if pairs:
            self.call(rq.RememberReplies(pairs))

    def probe(self) -> HardwareInfo:
        """RAM, GPUs and backends as the engine process sees them (no GPU code loads here)."""
        return self.call(rq.Probe())

    def memory(self) -> ProcessMemory:
        """The engine process's RSS and device memory, with llama.cpp's buffer sums."""
        return self.call(rq.Memory())

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        """Change the CPU threads live (no reload)."""
        self.call(rq.SetThreads(n_threads, n_threads_batch))

    def measure(self, prompt_tokens: int = 512, decode_tokens: int = 64) -> SpeedSample:
        """Prefill and decode speed on a fixed workload; empties the KV cache.
        ``stop()`` ends it within a token (EngineError "aborted")."""
        return self.call(rq.Measure(prompt_tokens, decode_tokens))

    def score(self, request: ScoreRequest) -> TextScore:
        """Perplexity / KLD of a model file on fixed tokens (unloads the chat model)."""
        return self.call(rq.Score(request))

    def quantize(self, source: str, target: str, ftype: str, n_threads: int = 2) -> int:
        """Make ``target`` from ``source`` with llama.cpp's quantizer (bytes written)."""
        return self.call(rq.Quantize(str(source), str(target), ftype, n_threads))

    def kv(self) -> KvUsage:
        return self.call(rq.Kv())

    def render(
        self, messages: Sequence[Mapping[str, str]], images: Sequence[ImageInput] = ()
    ) -> list[int]:
        """Prompt token ids for these messages (what the next turn would prefill; an
        image's positions hold negative ids)."""
        return self.call(rq.Render([dict(m) for m in messages], _portable(images)))

    def control_tokens(self, ids: Sequence[int]) -> list[int]:
        """The ids among ``ids`` that are control tokens, in order."""
        return self.call(rq.ControlTokens(list(ids)))

    def tokenize(self, text: str) -> list[int]:
        return self.call(rq.Tokenize(text))

    def crash(self, how: str = "segfault") -> None:
        """Make the engine die (for tests)."""
        with contextlib.suppress(EngineError):
            self.call(rq.Crash(how))

    def stop(self) -> None:
        """Stop the turn in progress (any thread); it ends within one token."""
        rid = self._current
        if rid is not None and self.alive:
            with contextlib.suppress(EngineError):
                self._send(rq.Stop(rid))

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = PLAIN,
    ) -> Iterator[Event]:
        """Stream the reply to the last message as events; ends with Done or Error.

        ``options.images``: one per ``MEDIA_MARKER`` in the messages, in order (bytes or
        paths). ``options.tools``: OpenAI's tools list (JSON), rendered by a template
        with a tool format; ``json_schema`` or ``grammar`` (GBNF): the reply is
        constrained to fit it (llama.cpp's grammar).
        """
        sampling = sampling or SamplingSettings()
        payload = [
            {k: m[k] for k in ("role", "content", "tool_call_id", "name") if k in m}
            for m in messages
        ]
        if options.images and not self.capabilities.vision:
            yield ErrorEvent(
                ErrorKind.NO_VISION,
                "This model cannot see images: it was loaded without a multimodal "
                "projector (mmproj).",
            )
            return
        request = rq.Chat(payload, sampling, replace(options, images=_portable(options.images)))
        with self._request_lock:
            yield from self._chat_locked(request)

    def _chat_locked(self, request: rq.Chat) -> Iterator[Event]:
        rid = next(self._ids)
        parts: list[str] = []
        t0 = time.perf_counter()
        t_first = t_last = 0.0
        finished = False
        try:
            self._require_alive()
            self._current = rid
            self._send(rq.Call(rid, request))
            while True:
                message = self._recv()
                if type(message) is tuple:  # tokens, the hot path
                    if message[1] != rid:
                        continue
                    if message[0] == "tok":
                        events: tuple[Event, ...] = (TokenEvent(message[2], message[3]),)
                    else:  # "toks": tokens sent together while this reader lagged
                        events = tuple(TokenEvent(text, token) for text, token in message[2])
                elif isinstance(message, rq.TurnEvent) and message.rid == rid:
                    events = (message.event,)
                elif isinstance(message, rq.Failure) and message.rid == rq.UNREAD:
                    raise message.error
                else:
                    continue
                for event in events:
                    if isinstance(event, TokenEvent):
                        t_last = time.perf_counter()
                        if not t_first:
                            t_first = t_last
                        parts.append(event.text)
                    elif isinstance(event, StatsEvent) and t_first:
                        # Times as the caller sees them: the whole path through the pipe.
                        event = StatsEvent(
                            replace(event.stats, ttft_s=t_first - t0, decode_s=t_last - t_first)
                        )
                    elif isinstance(event, DoneEvent) and t_first:
                        stats = replace(event.stats, ttft_s=t_first - t0, decode_s=t_last - t_first)
                        event = replace(event, stats=stats)
                    finished = isinstance(event, DoneEvent | ErrorEvent)
                    yield event
                    if finished:
                        return
        except EngineError as exc:
            finished = True
            yield ErrorEvent(exc.kind, exc.message, partial_text="".join(parts))
        finally:
            self._current = None
            if not finished:
                self._drain(rid)

    def _drain(self, rid: int) -> None:
        """The caller abandoned a stream: stop the turn and read to its end."""
        try:
            self._send(rq.Stop(rid))
            while True:
                message = self._recv()
                if (
                    isinstance(message, rq.TurnEvent)
                    and message.rid == rid
                    and isinstance(message.event, DoneEvent | ErrorEvent)
                ):
                    return
        except EngineError:
            return


def _portable(images: Sequence[ImageInput]) -> tuple[bytes | str, ...]:
    """Images as they cross the pipe: bytes, or a file's path (read by the engine)."""
    return tuple(bytes(i) if isinstance(i, bytes | bytearray) else str(i) for i in images)
