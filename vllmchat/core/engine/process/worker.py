"""The engine process: owns the model, answers one request at a time.

Messages are the typed values of ``requests``: a ``Call`` of a request is
answered by a ``Reply`` or a ``Failure``, a chat turn by ``TurnEvent``s and
token tuples; a ``Stop`` is handled at once by a reader thread, so a turn in
progress sees it at its next token.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from multiprocessing.connection import Connection
from typing import Any

import llama_cpp  # noqa: F401  (first: the CUDA build segfaults if numpy loads before it)

from vllmchat.core.engine import requests as rq
from vllmchat.core.engine.events import EngineError, ErrorEvent, ErrorKind, TokenEvent
from vllmchat.core.engine.info import (
    KvUsage,
    ProcessMemory,
    ReloadResult,
    ScoreRequest,
    SpeedSample,
    StateTransfer,
    TextScore,
)
from vllmchat.core.engine.model_check import model_fingerprint
from vllmchat.core.engine.process import llama_log
from vllmchat.core.engine.process.measure import measure_speed, process_memory
from vllmchat.core.engine.process.runtime import LlamaRuntime
from vllmchat.core.engine.process.scoring import quantize, score_model
from vllmchat.core.engine.process.state_file import KVState, read_state, write_state
from vllmchat.core.engine.process.turn import run_turn
from vllmchat.core.settings import LoadSettings

_log = logging.getLogger(__name__)


class Worker:
    """Dispatches requests to the loaded runtime."""

    def __init__(self, conn: Connection, start_free: int | None = None) -> None:
        self.conn = conn
        self.start_free = start_free  # NVIDIA devices' free bytes before llama.cpp loaded
        self.runtime: LlamaRuntime | None = None
        self.requests: queue.Queue[rq.Call | rq.Exit] = queue.Queue()
        self.stopped: set[int] = set()
        # With cores to spare, messages are pickled and written by a sender thread,
        # which runs while the decode loop is inside llama.cpp (ctypes releases the
        # GIL). Without, that thread would take a core from llama.cpp's own threads,
        # so the decode loop writes them itself.
        self.outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.send_lock = threading.Lock()
        self.threaded_send = False
        self.writer: threading.Thread | None = None  # the last checkpoint's file writer
        self.write_error: EngineError | None = None  # why the last checkpoint was not written

    def send(self, message: Any) -> None:
        if self.threaded_send:
            self.outbox.put(message)
            return
        with self.send_lock:
            self.conn.send(message)

    def send_loop(self) -> None:
        """Write queued messages; tokens that queued up while the reader lagged go as one."""
        held: list[Any] = []  # taken from the queue, not yet sent
        while True:
            message = held.pop() if held else self.outbox.get()
            if message is None:
                return
            if isinstance(message, tuple) and message[0] == "tok":
                batch = [message]
                while True:
                    try:
                        extra = self.outbox.get_nowait()
                    except queue.Empty:
                        break
                    same = isinstance(extra, tuple) and extra[0] == "tok" and extra[1] == message[1]
                    if not same:
                        held.append(extra)
                        break
                    batch.append(extra)
                if len(batch) > 1:
                    message = ("toks", message[1], [(m[2], m[3]) for m in batch])
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
            if isinstance(message, rq.Stop):
                self.stopped.add(message.rid)
            else:
                self.requests.put(message)

    def serve(self) -> None:
        threading.Thread(target=self.read_loop, daemon=True, name="engine-reader").start()
        sender = threading.Thread(target=self.send_loop, daemon=True, name="engine-sender")
        sender.start()
        while True:
            call = self.requests.get()
            if isinstance(call, rq.Exit):
                break
            rid, request = call.rid, call.request
            if isinstance(request, rq.Chat):
                self.chat(rid, [dict(m) for m in request.messages], request.sampling)
                continue
            try:
                handler = OPERATIONS[type(request)]
                args = [getattr(request, f.name) for f in fields(request)]
                if request.stoppable:
                    args.append(lambda rid=rid: rid in self.stopped)
                value = handler(self, *args)
            except EngineError as exc:
                log_failure(type(request).__name__, exc)
                self.send(rq.Failure(rid, exc))
            except Exception as exc:  # report, never die on a bad request
                log_failure(type(request).__name__, exc)
                self.send(rq.Failure(rid, EngineError(ErrorKind.INTERNAL, repr(exc))))
            else:
                self.send(rq.Reply(rid, value))
            finally:
                self.stopped.discard(rid)
        self.outbox.put(None)
        sender.join(5)
        if self.writer is not None:
            self.writer.join()  # a checkpoint is never left half-written
        if self.runtime is not None:
            self.runtime.close()

    def require_runtime(self) -> LlamaRuntime:
        if self.runtime is None:
            raise EngineError(ErrorKind.NO_MODEL, "No model is loaded.")
        return self.runtime

    def chat(self, rid: int, messages: list[dict[str, str]], sampling: Any) -> None:
        def emit(event: Any) -> None:
            if type(event) is TokenEvent:  # the hot path: a plain tuple pickles faster
                self.send(("tok", rid, event.text, event.token_id))
            else:
                self.send(rq.TurnEvent(rid, event))

        if self.runtime is None:
            emit(ErrorEvent(ErrorKind.NO_MODEL, "No model is loaded."))
            return
        try:
            run_turn(
                self.runtime, messages, sampling, should_stop=lambda: rid in self.stopped, emit=emit
            )
        except EngineError as exc:
            log_failure("The turn", exc)
            emit(ErrorEvent(exc.kind, exc.message))
        except Exception as exc:
            log_failure("The turn", exc)
            emit(ErrorEvent(ErrorKind.INTERNAL, repr(exc)))
        finally:
            self.stopped.discard(rid)

    # -- operations ---------------------------------------------------------
    def op_ping(self) -> str:
        return "pong"

    def op_load(self, settings: LoadSettings) -> Any:
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        self.runtime = LlamaRuntime(settings)
        self._choose_sender(settings)
        return self.runtime.info

    def _choose_sender(self, settings: LoadSettings) -> None:
        spare = (os.cpu_count() or 1) - settings.n_threads
        deadline = time.monotonic() + 5
        while not self.outbox.empty() and time.monotonic() < deadline:
            time.sleep(0.001)  # keep the order of messages across the switch
        self.threaded_send = spare >= 2

    def binding(self, runtime: LlamaRuntime) -> dict[str, Any]:
        return {
            "model": model_fingerprint(runtime.settings.model_path),
            **runtime.settings.state_binding(),
        }

    def op_reload(self, settings: LoadSettings) -> ReloadResult:
        """Load with new settings, carrying the KV state over when it can."""
        old = self.require_runtime()
        t0 = time.perf_counter()
        old_binding = self.binding(old)
        data, tokens = old.save_state()
        replies = old._replies
        old.close()
        self.runtime = None
        self.runtime = LlamaRuntime(settings)
        self._choose_sender(settings)
        new = self.runtime
        new._replies = replies
        reason = ""
        if not tokens:
            restored = True
        elif self.binding(new) != old_binding:
            restored, reason = False, "the KV cache type or attention settings changed"
        elif len(tokens) >= new.n_ctx:
            restored, reason = (
                False,
                (f"the new context ({new.n_ctx}) is smaller than the {len(tokens)} tokens in use"),
            )
        else:
            restored = new.restore_state(data, tokens)
            reason = "" if restored else "llama.cpp refused the saved state"
        seconds = time.perf_counter() - t0
        return ReloadResult(new.info, restored, len(tokens), reason, seconds, len(data))

    def op_export_state(self, path: str) -> StateTransfer:
        rt = self.require_runtime()
        data, tokens = rt.save_state()
        try:
            size = write_state(path, KVState(self.binding(rt), tokens, data))
        except OSError as exc:
            raise _not_written(path, exc) from exc
        return StateTransfer(len(tokens), size)

    def _write_checkpoint(self, path: str, state: KVState) -> None:
        """The checkpoint thread: a file that cannot be written is left out (no partial
        file) and the reason kept for the next checkpoint to report."""
        try:
            write_state(path, state)
        except OSError as exc:
            self.write_error = _not_written(path, exc)

    def op_checkpoint(self, path: str) -> StateTransfer:
        """Copy the KV state now and write it to ``path`` on a thread: the next turn
        does not wait for the disk. A later checkpoint waits for the previous write."""
        rt = self.require_runtime()
        data, tokens = rt.save_state()
        state = KVState(self.binding(rt), tokens, data)
        if self.writer is not None:
            self.writer.join()
        failed, self.write_error = self.write_error, None
        self.writer = threading.Thread(
            target=self._write_checkpoint, args=(path, state), name="vllmchat-checkpoint",
            daemon=True,
        )  # fmt: skip
        self.writer.start()
        if failed is not None:
            raise failed  # the previous checkpoint's file could not be written
        return StateTransfer(len(tokens), len(data))

    def op_import_state(self, path: str) -> StateTransfer:
        rt = self.require_runtime()
        state = read_state(path, expect=self.binding(rt))
        if len(state.tokens) >= rt.n_ctx:
            raise EngineError(
                ErrorKind.STATE_MISMATCH,
                f"The saved state holds {len(state.tokens)} tokens; the context holds {rt.n_ctx}.",
            )
        if not rt.restore_state(state.data, state.tokens):
            raise EngineError(ErrorKind.STATE_MISMATCH, "llama.cpp refused the saved state.")
        return StateTransfer(len(state.tokens), len(state.data))

    def op_remember_replies(self, pairs: list[tuple[str, list[int]]]) -> None:
        rt = self.require_runtime()
        for text, ids in pairs:
            rt.remember_reply(text, ids)

    def op_probe(self) -> Any:
        """RAM, GPUs and offload support, read where llama.cpp's backends live."""
        from vllmchat.core.models.hardware_probe import probe

        return probe()

    def op_memory(self) -> ProcessMemory:
        """RSS and device memory of this process, with llama.cpp's buffer sums."""
        buffers = self.runtime.info.buffers_mib if self.runtime is not None else {}
        return process_memory(self.start_free, buffers)

    def op_set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        self.require_runtime().set_threads(n_threads, n_threads_batch)

    def op_measure(
        self, prompt_tokens: int, decode_tokens: int, should_stop: Callable[[], bool]
    ) -> SpeedSample:
        """Speed on the fixed workload (empties the KV cache)."""
        return measure_speed(self.require_runtime(), prompt_tokens, decode_tokens, should_stop)

    def op_score(self, request: ScoreRequest, should_stop: Callable[[], bool]) -> TextScore:
        """Next-token quality of a model file on a fixed text (the quant lab).

        The chat model is unloaded first: two models at once may not fit."""
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        return score_model(request, should_stop)

    def op_quantize(self, source: str, target: str, ftype: str, n_threads: int) -> int:
        return quantize(source, target, ftype, n_threads)

    def op_kv(self) -> KvUsage:
        rt = self.require_runtime()
        return KvUsage(rt.llm.n_tokens, rt.n_ctx)

    def op_tokenize(self, text: str) -> list[int]:
        return self.require_runtime().tokenize(text, special=False)

    def op_control_tokens(self, ids: list[int]) -> list[int]:
        rt = self.require_runtime()
        return [i for i in ids if rt.is_special(i)]

    def op_render(self, messages: list[dict[str, str]]) -> list[int]:
        return self.require_runtime().render(messages)

    def op_crash(self, how: str) -> None:
        """Die on purpose (tests of the client's crash handling)."""
        import ctypes
        import os
        import signal

        if how == "segfault":
            ctypes.string_at(0)
        os.kill(os.getpid(), signal.SIGABRT if how == "abort" else signal.SIGKILL)


# Each request type and the operation that serves it (its fields are the arguments).
OPERATIONS: dict[type[rq.Request], Callable[..., Any]] = {
    rq.Ping: Worker.op_ping,
    rq.Load: Worker.op_load,
    rq.Reload: Worker.op_reload,
    rq.ExportState: Worker.op_export_state,
    rq.Checkpoint: Worker.op_checkpoint,
    rq.ImportState: Worker.op_import_state,
    rq.RememberReplies: Worker.op_remember_replies,
    rq.Probe: Worker.op_probe,
    rq.Memory: Worker.op_memory,
    rq.SetThreads: Worker.op_set_threads,
    rq.Measure: Worker.op_measure,
    rq.Score: Worker.op_score,
    rq.Quantize: Worker.op_quantize,
    rq.Kv: Worker.op_kv,
    rq.Tokenize: Worker.op_tokenize,
    rq.ControlTokens: Worker.op_control_tokens,
    rq.Render: Worker.op_render,
    rq.Crash: Worker.op_crash,
}


def worker_main(conn: Connection, start_free: int | None = None) -> None:
    """Entry point of the engine process."""
    llama_log.install()
    Worker(conn, start_free).serve()


def log_failure(what: str, exc: Exception) -> None:
    """Log a failure this process reports, with its traceback and llama.cpp's last lines."""
    level = logging.WARNING if isinstance(exc, EngineError) else logging.ERROR
    last = "".join(f"\n  {line}" for line in llama_log.lines_since()[-8:])
    said = f"\nllama.cpp's last lines:{last}" if last else ""
    _log.log(level, "%s failed: %s%s", what, exc, said, exc_info=exc)


def _not_written(path: str, exc: OSError) -> EngineError:
    reason = exc.strerror or str(exc)
    return EngineError(
        ErrorKind.STORAGE,
        f"The conversation is saved; its KV state could not be written ({reason}): "
        "the next start re-reads it.",
    )
