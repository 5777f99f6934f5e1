"""What the API front end asks of the application: the models on offer, chat turns
through the engine's one queue with each client's KV state, embeddings, a log.

The service owns no conversation: an API client's history comes with each request.
The engine keeps the clients' KV states (``api_states``) beside the conversations',
where the application's ``kv`` told it; the service tells their changes, and each
request it served, to its listeners (the window's Server panel, ``vllmchat serve``'s
log).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.engine_queue import API, EngineQueue, Holder
from vllmchat.core.app.events import Loaded, LoadFailed
from vllmchat.core.app.serving.api_turn import (
    ApiChat,
    ApiEvent,
    ApiFailed,
    prompt_length,
    run_api_turn,
)
from vllmchat.core.app.serving.model_card import LoadedModel, ModelCard, loaded_model, model_card
from vllmchat.core.app.serving.models_on_offer import OfferedModel, offered_models
from vllmchat.core.app.voice.events import SpeakFailed, SpokenPiece
from vllmchat.core.app.voice.service import VoiceService
from vllmchat.core.engine.api_states import (
    WINDOW_PREFIX,
    ApiSlot,
    RunsSlots,
    SaveStates,
    ServesRequests,
    StatesChanged,
    keeps_states,
)
from vllmchat.core.engine.embedding import can_embed, embed
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.gguf_header import read_header
from vllmchat.core.listeners import Listeners
from vllmchat.core.tools.prompting import tool_format
from vllmchat.core.tuning.cache import TuneCache
from vllmchat.core.voice.events import TranscriptionEvent

_log = logging.getLogger(__name__)
MIB = 1 << 20


@dataclass(frozen=True)
class RequestLogged:
    """A request the API answered: when, from whom, what, how it went."""

    at: float  # time.time()
    client: str
    what: str  # "POST /v1/chat/completions"
    status: int
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    note: str = ""
    place_ms: float = 0.0  # the client's state made live before the turn
    first_token_ms: float = 0.0  # the engine's time to the first token
    decode_tok_s: float = 0.0  # the engine's decode speed of the reply


@dataclass(frozen=True)
class ModelFacts:
    """What the API needs to know of a model before a turn: its context and tool format."""

    id: str
    n_ctx: int
    tool_format: str
    vision: bool


def same_file(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


@dataclass(frozen=True)
class ModelSwitched:
    """An API request loaded another model (or the load failed: ``failed`` says why)."""

    model: str
    failed: str = ""


class VoiceBusy(RuntimeError):
    """The recogniser (or the voice) served other requests for longer than ``api_timeout_s``."""


T = TypeVar("T")


class ApiService:
    """The application's side of the local API, on one ``ChatApp``."""

    def __init__(
        self,
        app: ChatApp,
        *,
        tune_cache: TuneCache | None = None,
    ) -> None:
        self.app = app
        self.queue: EngineQueue = app.engine_queue
        self.queue.limit = app.settings.api_queue_limit
        self.tune_cache = tune_cache or TuneCache()
        self.log: Listeners[RequestLogged] = Listeners("API request log")
        self.models_changed: Listeners[ModelSwitched] = Listeners("API model switch")
        self.states_changed: Listeners[StatesChanged] = Listeners("API client states")
        self._states: StatesChanged | None = None  # as the engine told them last
        self._last_used = time.monotonic()
        # One recogniser and one voice: audio requests take turns on each (not the engine's queue).
        self._hearing = threading.Lock()
        self._speaking = threading.Lock()

    # -- queries -------------------------------------------------------------------------
    def models(self) -> list[OfferedModel]:
        loaded = self.app.engine.info.path if self.app.engine.info is not None else ""
        return offered_models(
            self.app.settings.model_folders, loaded or self.app.settings.load.model_path
        )

    def loaded_model(self) -> str:
        info = self.app.engine.info
        return Path(info.path).stem if info is not None else ""

    def facts(self, model: OfferedModel | None) -> ModelFacts:
        """What a request for ``model`` (None: the loaded one) is read against."""
        info = self.app.engine.info
        n_ctx = self.app.settings.load.n_ctx
        if info is not None and (model is None or same_file(info.path, model.path)):
            return ModelFacts(Path(info.path).stem, info.n_ctx, info.tool_format, info.vision)
        if model is None:
            path = self.app.settings.load.model_path
            return ModelFacts(Path(path).stem if path else "", n_ctx, "", False)
        try:
            template = str(read_header(model.path).metadata.get("tokenizer.chat_template", ""))
        except (OSError, ValueError):
            template = ""
        return ModelFacts(model.id, n_ctx, tool_format(template) if template else "", model.vision)

    def card(self, model: OfferedModel | None) -> ModelCard | None:
        """What ``model`` is (None: the one loaded, or chosen to load; None if neither)."""
        info = self.app.engine.info
        if model is None:
            path = info.path if info is not None else self.app.settings.load.model_path
            found = [m for m in self.models() if path and same_file(m.path, path)]
            if not found:
                return None
            model = found[0]
        loaded = info if info is not None and same_file(info.path, model.path) else None
        return model_card(model, loaded)

    def running(self) -> list[LoadedModel]:
        """The model the engine holds (none, or one), with its memory and when it goes."""
        info = self.app.engine.info
        card = self.card(None) if info is not None else None
        if info is None or card is None:
            return []
        minutes = self.app.settings.api_idle_unload_min
        left = minutes * 60 - (time.monotonic() - self._last_used)
        return [loaded_model(card, info, time.time() + max(left, 0) if minutes > 0 else None)]

    def states(self) -> StatesChanged | None:
        return self._states

    # -- the clients' states -------------------------------------------------------------
    def _keep_states(self) -> bool:
        """Whether the engine runs API slots; the application's ``kv`` tells it once
        where to keep their states (again after a restart, or when the caps change)."""
        engine = self.app.engine
        if not keeps_states(engine) or engine.info is None:
            return False
        told = self.app.kv.bind(engine)
        if told is not None:
            self._told_states(told)
        return True

    def _told_states(self, states: StatesChanged) -> None:
        """Tell the clients' states (the window's conversations are its own)."""
        clients = tuple(s for s in states.states if not s.key.startswith(WINDOW_PREFIX))
        self._states = replace(states, states=clients)
        self.states_changed.tell(self._states)

    # -- turns ---------------------------------------------------------------------------
    def chat(
        self,
        request: ApiChat,
        model: OfferedModel | None,
        *,
        gave_up: Callable[[], bool] = lambda: False,
        started: Callable[[Holder], None] = lambda holder: None,
    ) -> Iterator[ApiEvent]:
        """Answer ``request`` on ``model`` (None: the one loaded), in the queue's turn
        (``started`` is told when it begins). ``QueueFull`` and ``GaveUp`` (from the
        queue) reach the caller."""
        timeout = float(self.app.settings.api_timeout_s)
        client = request.client or "anonymous"
        if self._needs_load(model):  # the engine alone for the load, then the turn's share
            with self.queue.hold(
                API, client, "loading the model", timeout_s=timeout, gave_up=gave_up
            ):
                failed = self._ensure_model(model)
            if failed is not None:
                yield failed
                return
        slots = max(1, self.app.settings.api_parallel)
        with self.queue.share(
            API, client, request.label, slots=slots, timeout_s=timeout, gave_up=gave_up
        ) as holder:
            started(holder)
            failed = self._ensure_model(model) if self._needs_load(model) else None
            if failed is not None:
                yield failed
                return
            slot = ApiSlot(request.client or "") if self._keep_states() else None
            yield from run_api_turn(
                self.app.engine,
                request,
                slot=slot,
                on_states=self._told_states,
                ticket=holder.ticket,
            )
            self._last_used = time.monotonic()

    def _needs_load(self, model: OfferedModel | None) -> bool:
        """Whether ``model`` (None: the one chosen) must be loaded first, or loaded anew
        with the API's slots, or again in a new process (the engine's ended)."""
        info = self.app.engine.info
        if info is None or self.app.engine.exit_reason() is not None:
            return True
        if model is not None and not same_file(info.path, model.path):
            return True
        return keeps_states(self.app.engine) and info.api_slots != self._slots_wanted()

    def _slots_wanted(self) -> int:
        return max(1, self.app.settings.api_parallel)

    def count_tokens(self, request: ApiChat, model: OfferedModel | None) -> int:
        """Tokens of ``request``'s prompt on ``model`` (None: the one loaded), as its turn
        would prefill them, in the queue's turn (the model loaded first where need be).
        ``EngineError`` when it cannot be loaded or rendered; ``QueueFull`` and ``GaveUp``
        from the queue."""
        timeout = float(self.app.settings.api_timeout_s)
        client = request.client or "anonymous"
        with self.queue.hold(API, client, request.label, timeout_s=timeout):
            failed = self._ensure_model(model)
            if failed is not None:
                raise EngineError(failed.kind, failed.message, fix="")
            return prompt_length(self.app.engine, request)

    def stop(self, holder: Holder) -> None:
        """Stop ``holder``'s turn now (its client left), if it still runs: in its slot,
        at the engine's next step."""
        engine = self.app.engine
        if isinstance(engine, RunsSlots) and keeps_states(engine):
            engine.stop_slot(holder.ticket)
        elif self.queue.snapshot().running == holder:
            engine.stop()

    def _ensure_model(self, model: OfferedModel | None) -> ApiFailed | None:
        """Load ``model`` (None: the one chosen) where it is not loaded, or loaded
        without the API's slots (the window's conversation carried across)."""
        engine = self.app.engine
        same = model is None or (
            engine.info is not None and same_file(engine.info.path, model.path)
        )
        if not self._needs_load(model):
            return None
        if model is None and not self.app.settings.load.model_path:
            return ApiFailed(ErrorKind.NO_MODEL, "No model is loaded and none is chosen.")
        settings = self.app.settings
        if model is not None and not same:
            settings = settings.for_model(model.path)
            if self.app.hardware is not None:
                tuned = self.tune_cache.get(
                    settings.load, self.app.hardware, settings.gpu_margin_mib
                )
                if tuned is not None and tuned.pick is not None:
                    settings = settings.with_placement(tuned.pick.placement)
        if keeps_states(engine):
            settings = settings.with_changes(api_slots=self._slots_wanted())
        name = Path(settings.load.model_path).stem
        live = same and engine.info is not None and engine.exit_reason() is None
        for event in self.app.load(settings, live=live, remember=False):
            if isinstance(event, LoadFailed):
                self.models_changed.tell(ModelSwitched(name, event.message))
                return ApiFailed(event.kind, f"{name} could not be loaded: {event.message}")
            if isinstance(event, Loaded):
                self.models_changed.tell(ModelSwitched(name))
        return None

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """Vectors from the embedding model set in the settings (``EngineError`` else)."""
        path = self.app.settings.embedding_model
        if not path:
            raise EngineError(
                ErrorKind.BAD_REQUEST,
                "No embedding model is set: choose one in Settings (embedding_model).",
                fix="",
            )
        if not can_embed(self.app.engine):
            raise EngineError(ErrorKind.BAD_REQUEST, "This engine computes no embeddings.", fix="")
        with self.queue.hold(API, "embeddings", "embeddings"):
            return embed(self.app.engine, path, texts)

    # -- audio -------------------------------------------------------------------------
    @property
    def voice(self) -> VoiceService:
        """The app's voice (the window's too): its recogniser and its speaker."""
        return self.app.voice

    def transcribe(
        self, path: Path, *, language: str | None = None
    ) -> Generator[TranscriptionEvent, None, None]:
        """The audio file at ``path`` transcribed, in the recogniser's turn."""
        yield from self._in_turn(
            self._hearing, "speech recogniser", self.voice.transcribe_file(path, language=language)
        )

    def speak(
        self, text: str, *, voice: str | None = None, speed: float | None = None
    ) -> Generator[SpokenPiece | SpeakFailed, None, None]:
        """``text`` spoken sentence by sentence, in the voice's turn (held until closed)."""
        yield from self._in_turn(
            self._speaking,
            "voice",
            self.voice.speak_text(text, voice=voice, speed=speed, barge_in=False),
        )

    def _in_turn(
        self, lock: threading.Lock, what: str, events: Iterator[T]
    ) -> Generator[T, None, None]:
        if not lock.acquire(timeout=float(self.app.settings.api_timeout_s)):
            raise VoiceBusy(f"The {what} is busy with other requests: try again later.")
        try:
            yield from events
        finally:
            lock.release()

    def unload_if_idle(self) -> bool:
        """Let the model go after ``api_idle_unload_min`` unused (0: never)."""
        minutes = self.app.settings.api_idle_unload_min
        if minutes <= 0 or self.app.engine.info is None:
            return False
        if time.monotonic() - self._last_used < minutes * 60:
            return False
        with self.queue.hold(API, "idle", "unloading an idle model"):
            self.close_states()
            self.app.engine.close()
        return True

    def close_states(self) -> None:
        """Have the engine write the clients' states to disk (before the model goes, or
        at the end)."""
        engine = self.app.engine
        if self.app.kv.told and engine.alive and isinstance(engine, ServesRequests):
            try:
                self._told_states(engine.call(SaveStates()))
            except EngineError as exc:
                _log.warning("The clients' KV states could not all be saved: %s", exc)

    def close(self) -> None:
        """Keep the clients' states for the next start, and stop listening to the queue."""
        try:
            with self.queue.hold(API, "shutdown", "saving the clients' states", timeout_s=30):
                self.close_states()
        except Exception as exc:  # the states in RAM are lost: say so in the log
            _log.warning("The clients' KV states were not saved: %s", exc)
