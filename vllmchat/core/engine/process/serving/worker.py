"""The engine process: owns the model, answers one request at a time.

Messages are the typed values of ``requests``: a ``Call`` of a request is
answered by a ``Reply`` or a ``Failure`` (a chat turn by ``TurnEvent``s and
token tuples), from the request type's one handler (``registry``, ``handlers``);
a ``Stop`` is handled at once by a reader thread, so a call in progress sees it
at its next token.
"""

from __future__ import annotations

import importlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

import llama_cpp  # first: the CUDA build segfaults if numpy loads before it

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.api_states import ResumeWindow
from vllmchat.core.engine.core_turns import CoreTurns
from vllmchat.core.engine.events import EngineError, ErrorEvent, ErrorKind, TokenEvent
from vllmchat.core.engine.model_check import model_fingerprint
from vllmchat.core.engine.process.inference.runtime import LlamaRuntime
from vllmchat.core.engine.process.inference.slot_pace import ASKING_S
from vllmchat.core.engine.process.inference.slots import SlotLoop
from vllmchat.core.engine.process.inference.state_cache import StateCache, binding_folder
from vllmchat.core.engine.process.llama import llama_log
from vllmchat.core.engine.process.serving.registry import handler_for
from vllmchat.core.settings import LoadSettings, usable_cores

_log = logging.getLogger(__name__)


class Worker:
    """Reads requests, runs each one's handler, sends the answers; holds the runtime."""

    def __init__(
        self, conn: Connection, start_free: int | None = None, turns: CoreTurns | None = None
    ) -> None:
        self.conn = conn
        self.turns = turns  # a core lent between tokens (shared with the client)
        self.core_lent = False  # the decode runs on one thread fewer meanwhile
        self.start_free = start_free  # NVIDIA devices' free bytes before llama.cpp loaded
        self.runtime: LlamaRuntime | None = None
        self.requests: queue.Queue[rq.Call | rq.Exit | None] = queue.Queue()  # None: wake
        self.slot_inbox: queue.SimpleQueue[rq.Call] = queue.SimpleQueue()  # API slot turns
        self._slots: SlotLoop | None = None
        self.stopped: set[int] = set()
        self.current = 0  # the id of the call being answered (ids start at 1)
        self.asking_until = 0.0  # the clients' prompts wait until then (``ASKING_S``)
        # With cores to spare, messages are pickled and written by a sender thread,
        # which runs while the decode loop is inside llama.cpp (ctypes releases the
        # GIL). Without, that thread would take a core from llama.cpp's own threads,
        # so the decode loop writes them itself.
        self.outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.send_lock = threading.Lock()
        self.threaded_send = False
        self.states = StateCache()  # the KV states kept by key (the loaded model's)
        self.states_policy: tuple[str, int, int] | None = None  # folder root, RAM, disk caps

    def send(self, message: Any) -> None:
        if self.threaded_send:
            self.outbox.put(message)
            return
        with self.send_lock:
            self.conn.send(message)

    def send_loop(self) -> None:
        """Write queued messages; tokens that queued up together go as one message (a
        step's tokens of several turns: one pipe write, one wake-up of the app's reader)."""
        held: list[Any] = []  # taken from the queue, not yet sent
        while True:
            message = held.pop() if held else self.outbox.get()
            if message is None:
                return
            if type(message) is tuple and message[0] == "tok":
                batch = [message]
                while True:
                    try:
                        extra = self.outbox.get_nowait()
                    except queue.Empty:
                        break
                    if not (type(extra) is tuple and extra[0] == "tok"):
                        held.append(extra)
                        break
                    batch.append(extra)
                message = rq.tokens_message(batch)
            try:
                with self.send_lock:
                    self.conn.send(message)
            except (OSError, ValueError):
                return

    def read_loop(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                self.requests.put(rq.Exit())
                return
            except Exception as exc:  # a request this process cannot unpickle
                why = f"The engine could not read a request ({type(exc).__name__}: {exc})."
                self.send(rq.Failure(rq.UNREAD, EngineError(ErrorKind.BAD_REQUEST, why)))
                continue
            if isinstance(message, rq.Stop):
                self.stopped.add(message.rid)
                self.requests.put(None)  # a loop waiting for calls looks again
            elif isinstance(message, rq.Call) and isinstance(
                message.request, rq.SLOT_LOOP_REQUESTS
            ):
                self.slot_inbox.put(message)  # taken between steps, even within a turn
                self.requests.put(None)
            else:
                self.requests.put(message)

    def serve(self) -> None:
        threading.Thread(target=self.read_loop, daemon=True, name="engine-reader").start()
        sender = threading.Thread(target=self.send_loop, daemon=True, name="engine-sender")
        sender.start()
        while True:
            loop = self.take_slot_turns()
            if loop is not None and loop.busy:
                try:
                    call = self.requests.get_nowait()
                except queue.Empty:
                    # the API slots' step; any call waits at most one, and one without
                    # prompt chunks while the app asks (a window's turn starts with calls)
                    left = self.asking_until - time.monotonic()
                    if loop.step(beside_window=left > 0) or left <= 0:
                        continue
                    try:  # only prompts to read, and they wait: so does the loop
                        call = self.requests.get(timeout=left)
                    except queue.Empty:
                        continue
            else:
                call = self.requests.get()
            if call is None:
                continue
            if loop is not None:
                loop.flush()  # the slots' last tokens go before the call runs
            if isinstance(call, rq.Exit):
                break
            if loop is not None and _empties_slots(call.request):
                loop.abandon("The model was reloaded or unloaded: send the request again.")
            self.answer(call)
            if isinstance(call.request, BEFORE_A_WINDOW_TURN):
                self.asking_until = time.monotonic() + ASKING_S
        if self._slots is not None:
            self._slots.abandon("The engine is shutting down.")
        self.states.close()  # the states in RAM go to their files, none half-written
        self.outbox.put(None)
        sender.join(5)
        if self.runtime is not None:
            self.runtime.close()

    # -- the API slots ------------------------------------------------------------------
    def slot_loop(self) -> SlotLoop | None:
        """The slots of the model loaded (made anew for each load)."""
        rt = self.runtime
        if rt is None:
            return None
        if self._slots is None or self._slots.rt is not rt:
            if self._slots is not None:
                self._slots.close()
            self.bind_states()
            self._slots = SlotLoop(rt, self.states, self.send, self.stopped)
            rt.beside = self._step_beside
        return self._slots

    def take_slot_turns(self) -> SlotLoop | None:
        """Admit the API turns that came in; without a model they fail at once."""
        loop = self.slot_loop()
        while True:
            try:
                call = self.slot_inbox.get_nowait()
            except queue.Empty:
                return loop
            if loop is None:
                error = ErrorEvent(ErrorKind.NO_MODEL, "No model is loaded.")
                self.send(rq.TurnEvent(call.rid, error))
            else:
                assert isinstance(call.request, rq.SlotChat)
                loop.admit(call.rid, call.request)

    def _step_beside(self) -> None:
        """Within a window turn: one step of the API slots, if any turn runs there."""
        loop = self.take_slot_turns()
        if loop is not None and loop.busy:
            loop.step(beside_window=True)

    def answer(self, call: rq.Call) -> None:
        """Run the request's handler; its value is the reply, its error the failure."""
        rid, request = call.rid, call.request
        self.current = rid
        try:
            value = handler_for(request)(self, request)
        except EngineError as exc:
            log_failure(type(request).__name__, exc)
            failure = exc
        except Exception as exc:  # report, never die on a bad request
            log_failure(type(request).__name__, exc)
            failure = EngineError(ErrorKind.INTERNAL, repr(exc))
        else:
            if not request.streams:
                self.send(rq.Reply(rid, value))
            return
        finally:
            self.stopped.discard(rid)
            self.current = 0
        if request.streams:  # a turn always ends in Done or Error
            self.send(rq.TurnEvent(rid, ErrorEvent(failure.kind, failure.message)))
        else:
            self.send(rq.Failure(rid, failure))

    # -- what handlers use ----------------------------------------------------------------
    def stop_requested(self) -> bool:
        """Whether the caller stopped the call in progress (checked per token)."""
        return self.current in self.stopped

    @contextmanager
    def decoding(self) -> Iterator[None]:
        """A turn runs within: a borrower of a core waits for its next token."""
        if self.turns is None:
            yield
            return
        with self.turns.decoding():
            try:
                yield
            finally:
                self.take_core_back()

    def between_tokens(self) -> None:
        """Lend a core when one is asked for (or wait, on one thread), take it back when
        the borrower is done."""
        turns, runtime = self.turns, self.runtime
        if turns is None or runtime is None:
            return
        asked = turns.asked()
        if asked == self.core_lent:
            return
        if not asked:
            self.take_core_back()
        elif runtime.lend_a_core(True):
            self.core_lent = True
            turns.lent(True)
        else:
            turns.give_way()

    def take_core_back(self) -> None:
        if self.core_lent and self.runtime is not None:
            self.runtime.lend_a_core(False)
        self.core_lent = False
        if self.turns is not None:
            self.turns.lent(False)

    def turn_emitter(self) -> Callable[[Any], None]:
        """Send a turn's events for the call in progress: tokens as plain tuples."""
        rid, send = self.current, self.send
        between = self.between_tokens if self.turns is not None else _go_on

        def emit(event: Any) -> None:
            if type(event) is TokenEvent:  # the hot path: a plain tuple pickles faster
                send(("tok", rid, event.text, event.token_id))
                between()  # a core lent, or taken back
            else:
                send(rq.TurnEvent(rid, event))

        return emit

    def require_runtime(self) -> LlamaRuntime:
        if self.runtime is None:
            raise EngineError(ErrorKind.NO_MODEL, "No model is loaded.")
        return self.runtime

    def unload(self) -> None:
        """Let the model go, once the kept states' files are written: a new model or
        placement is where the process may abort, and those files are what it falls
        back to."""
        self.states.flush()
        if self._slots is not None:
            self._slots.abandon("The model was unloaded: send the request again.")
            self._slots.close()
            self._slots = None
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None

    def choose_sender(self, settings: LoadSettings) -> None:
        """Send from a thread when llama.cpp leaves two cores to spare; lend the cores
        between tokens when it leaves none."""
        if self.turns is not None:
            offloaded = settings.placement.uses_gpu and llama_cpp.llama_supports_gpu_offload()
            self.turns.lend_when(settings, offloaded=bool(offloaded))
        spare = usable_cores() - settings.n_threads
        deadline = time.monotonic() + 5
        while not self.outbox.empty() and time.monotonic() < deadline:
            time.sleep(0.001)  # keep the order of messages across the switch
        self.threaded_send = spare >= 2

    def bind_states(self) -> None:
        """Keep the states of the model loaded, in its folder under the policy's root
        (without a policy, in RAM only); another model's states go to their files."""
        rt = self.runtime
        if rt is None:
            return
        if self.states_policy is None:
            self.states.bind(self.binding(rt), None, self.states.ram_budget, 0)
            return
        root, ram, disk = self.states_policy
        folder = binding_folder(root, rt.settings.model_path, rt.settings.state_binding())
        self.states.bind(self.binding(rt), folder, ram, disk)

    def binding(self, runtime: LlamaRuntime) -> dict[str, Any]:
        """What a saved KV state is bound to: the model file and the state's settings."""
        return {
            "model": model_fingerprint(runtime.settings.model_path),
            **runtime.settings.state_binding(),
        }


def worker_main(
    conn: Connection,
    start_free: int | None = None,
    handler_modules: Sequence[str] = (),
    turns: CoreTurns | None = None,
) -> None:
    """Entry point of the engine process; ``handler_modules`` register more operations;
    ``turns``: the cores lent between tokens."""
    from vllmchat.core.engine.process.serving import handlers  # noqa: F401  (registers the operations)

    for name in handler_modules:
        importlib.import_module(name)
    llama_log.install()
    Worker(conn, start_free, turns).serve()


BEFORE_A_WINDOW_TURN = (ResumeWindow, rq.Render)  # the calls a window's turn starts with


def _empties_slots(request: rq.Request[Any]) -> bool:
    """Whether answering ``request`` ends the API slots' turns (their model or cells go)."""
    return request.changes_model or isinstance(request, rq.Reload | rq.Measure)


def _go_on() -> None:
    """No one borrows a core: the decode goes on."""


def log_failure(what: str, exc: Exception) -> None:
    """Log a failure this process reports, with its traceback and llama.cpp's last lines."""
    level = logging.WARNING if isinstance(exc, EngineError) else logging.ERROR
    last = "".join(f"\n  {line}" for line in llama_log.lines_since()[-8:])
    said = f"\nllama.cpp's last lines:{last}" if last else ""
    _log.log(level, "%s failed: %s%s", what, exc, said, exc_info=exc)
