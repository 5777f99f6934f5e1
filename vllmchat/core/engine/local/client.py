"""The one object a caller uses to talk to the engine process.

The model lives in a child process: a crash, abort, out-of-memory kill or
SIGKILL there becomes an ``ErrorEvent`` / ``EngineError(ENGINE_DIED)`` here,
never a crash of the caller. Requests are served one at a time; callers
from several threads queue on a lock. ``stop()`` may be called from any thread.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.api_states import ApiSlot
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
from vllmchat.core.engine.local.engine_process import EngineProcess
from vllmchat.core.engine.local.mailboxes import Mailboxes
from vllmchat.core.engine.protocol import LOCAL, Capabilities
from vllmchat.core.models.hardware import HardwareInfo
from vllmchat.core.settings import LoadSettings, SamplingSettings

VISION = replace(LOCAL, vision=True)


ReplyT = TypeVar("ReplyT")


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
        self.process = EngineProcess(memory_limit, handler_modules)
        # Answers sorted by request id: several callers wait at once.
        self._boxes = Mailboxes(lambda: self.process.recv())
        self._ids = itertools.count(1)
        self._request_lock = threading.Lock()  # a restart waits for no caller's answer
        self._current: int | None = None  # the window's turn (or measurement) in progress
        self._slot_turns: dict[int, int] = {}  # an API turn's ticket -> its request id
        self._held: rq.LoadedModel | None = None  # the model loaded, and its settings

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
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def last_error(self) -> EngineError | None:
        """How the engine process last died, as the error it raised."""
        return self.process.last_error

    def exit_reason(self) -> str | None:
        """How the engine process ended (None while it runs or before it started)."""
        return self.process.exit_reason()

    def start(self) -> None:
        """Start the engine process if it is not running."""
        self.process.start()

    def lend_cores(self) -> contextlib.AbstractContextManager[bool]:
        """A CPU core for the work within, lent by the reply decoding at its next token
        where llama.cpp keeps every core busy (True); else at once (False)."""
        return self.process.turns.borrowed()

    def close(self) -> None:
        """End the engine process (its model is gone: ``info`` is None)."""
        if self.alive:
            try:
                self.process.send(rq.Exit())
                self.process.join(timeout=5)
            except (OSError, EngineError):
                pass
        self.process.discard()
        self._held = None

    def restart(self) -> ModelInfo | None:
        """A fresh engine process, loaded with the settings of the model it held (if any:
        after a crash or kill, not after ``close``)."""
        held = self._held
        with self._request_lock:
            self.process.discard()
        self.start()
        if held is not None:
            return self.load(held.settings)
        return None

    def kill(self) -> None:
        """SIGKILL the engine process (what a crash looks like)."""
        self.process.kill()

    def call(self, request: rq.Request[ReplyT]) -> ReplyT:
        """Send ``request`` to the engine process and return its reply (the type the
        request declares); a failure there raises its ``EngineError`` here."""
        if request.streams:
            raise TypeError(f"{type(request).__name__} streams events: use chat()")
        if request.starts:
            self.start()
        self.process.require_alive()
        if request.changes_model:
            self._held = None  # the engine lets its model go first
        reply: ReplyT = self._answer(request)
        self._held = request.held(self._held, reply)
        return reply

    def _answer(self, request: rq.Request[Any]) -> Any:
        rid = next(self._ids)
        if request.stoppable:
            self._current = rid
        self._boxes.open(rid)
        try:
            self.process.send(rq.Call(rid, request))
            while True:
                message = self._boxes.next(rid)
                if isinstance(message, rq.Failure):
                    raise message.error
                if isinstance(message, rq.Reply):
                    return message.value
        finally:
            self._boxes.close(rid)
            if request.stoppable and self._current == rid:
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
        self,
        messages: Sequence[Mapping[str, str]],
        images: Sequence[ImageInput] = (),
        *,
        tools: str | None = None,
        thinking: bool = True,
    ) -> list[int]:
        """Prompt token ids for these messages (what the next turn would prefill; an
        image's positions hold negative ids); ``tools`` as ``ChatOptions.tools``."""
        return self.call(rq.Render([dict(m) for m in messages], _portable(images), tools, thinking))

    def control_tokens(self, ids: Sequence[int]) -> list[int]:
        """The ids among ``ids`` that are control tokens, in order."""
        return self.call(rq.ControlTokens(list(ids)))

    def tokenize(self, text: str) -> list[int]:
        return self.call(rq.Tokenize(text))

    def stop(self) -> None:
        """Stop the turn in progress (any thread); it ends within one token."""
        rid = self._current
        if rid is not None and self.alive:
            with contextlib.suppress(EngineError):
                self.process.send(rq.Stop(rid))

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        sampling: SamplingSettings | None = None,
        options: ChatOptions = PLAIN,
        *,
        slot: ApiSlot | None = None,
        ticket: int = 0,
    ) -> Iterator[Event]:
        """Stream the reply to the last message as events; ends with Done or Error.

        ``options.images``: one per ``MEDIA_MARKER`` in the messages, in order (bytes or
        paths). ``options.tools``: OpenAI's tools list (JSON), rendered by a template
        with a tool format; ``json_schema`` or ``grammar`` (GBNF): the reply is
        constrained to fit it (llama.cpp's grammar). ``slot``: an API client's turn in
        a sequence of its own, batched with the others (``SlotChat``; a ``StatesEvent``
        comes before its Done); without, the window's turn (one at a time, stopped by
        ``stop``).
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
        options = replace(options, images=_portable(options.images))
        if slot is not None:
            request = rq.SlotChat(
                payload, sampling, options, slot.client, slot.reuse, slot.fork_window
            )
            yield from self._stream(request, ticket)
        else:
            yield from self._stream(rq.Chat(payload, sampling, options), None)

    def stop_slot(self, ticket: int) -> None:
        """Stop the slot turn started with ``ticket`` (any thread); it leaves its slot
        at the engine's next step."""
        rid = self._slot_turns.get(ticket)
        if rid is not None and self.alive:
            with contextlib.suppress(EngineError):
                self.process.send(rq.Stop(rid))

    def _stream(self, request: rq.Chat, ticket: int | None) -> Iterator[Event]:
        """A turn's events; ``ticket`` None: the window's turn (``stop`` ends it)."""
        window = ticket is None
        rid = next(self._ids)
        if ticket:
            self._slot_turns[ticket] = rid
        parts: list[str] = []
        t0 = time.perf_counter()
        t_first = t_last = 0.0
        finished = False
        try:
            self.process.require_alive()
            if window:
                self._current = rid
            self._boxes.open(rid)
            self.process.send(rq.Call(rid, request))
            while True:
                message = self._boxes.next(rid)
                if type(message) is tuple:  # tokens, the hot path
                    if message[0] == "tok":
                        events: tuple[Event, ...] = (TokenEvent(message[2], message[3]),)
                    else:  # "toks": tokens sent together while this reader lagged
                        events = tuple(TokenEvent(text, token) for text, token in message[2])
                elif isinstance(message, rq.TurnEvent):
                    events = (message.event,)
                elif isinstance(message, rq.Failure):
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
            if self._current == rid:
                self._current = None
            if ticket:
                self._slot_turns.pop(ticket, None)
            if not finished:
                self._drain(rid)
            self._boxes.close(rid)

    def _drain(self, rid: int) -> None:
        """The caller abandoned a stream: stop the turn and read to its end."""
        try:
            self.process.send(rq.Stop(rid))
            while True:
                message = self._boxes.next(rid)
                if isinstance(message, rq.TurnEvent) and isinstance(
                    message.event, DoneEvent | ErrorEvent
                ):
                    return
        except (EngineError, RuntimeError):
            return


def _portable(images: Sequence[ImageInput]) -> tuple[bytes | str, ...]:
    """Images as they cross the pipe: bytes, or a file's path (read by the engine)."""
    return tuple(bytes(i) if isinstance(i, bytes | bytearray) else str(i) for i in images)
