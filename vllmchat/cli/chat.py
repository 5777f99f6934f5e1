"""``vllmchat chat``: streaming chat in the terminal, stored like the app's conversations."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from vllmchat.cli.chat_tools import TOOLS_HELP, open_tools, show_tool_event, tools_command
from vllmchat.cli.options import add_options, given
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.engines import open_server
from vllmchat.core.app.events import (
    EngineDied,
    Loaded,
    LoadFailed,
    PlacementFellBack,
    PlacementNeedsConfirmation,
    StorageWarning,
)
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.events import (
    PromptPlanEvent,
    SummaryEvent,
    ThinkingEvent,
    ThoughtFor,
)
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.conversations.store.faults import LockEvent
from vllmchat.core.conversations.store.recovery import open_default_store
from vllmchat.core.conversations.store.schema import NewerStoreError
from vllmchat.core.conversations.store.store import StoreError
from vllmchat.core.conversations.transfer import export_file
from vllmchat.core.conversations.turns.kv_cache import KVStateCache
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import (
    DoneEvent,
    EngineError,
    ErrorEvent,
    ErrorKind,
    PrefillProgressEvent,
    TokenEvent,
)
from vllmchat.core.engine.exactness import identity_note
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.engine.servers import url_warning
from vllmchat.core.paths import kv_cache_dir
from vllmchat.core.settings import LoadSettings, SamplingSettings
from vllmchat.core.tools.approval import ApprovalPolicy

log = logging.getLogger(__name__)
HELP = """commands:
  /history        the messages the model is given, and the summary (numbered)
  /pin N          keep message N word for word in every prompt (/unpin N undoes it)
  /summary        summarize the older turns now
  /facts          the facts kept word for word through summaries (numbered)
  /remember TEXT  add a fact   /fact N TEXT  reword fact N   /forget N  remove it
  /export PATH    write the conversation to PATH (.md or .json)
  /stats          last turn's statistics
  /ngl N          reload live with N GPU layers (the conversation's KV cache is kept)
  /moe N          reload live with the experts of N layers in RAM (mixtures of experts)
                  (past the memory estimate's bound they ask first: /ngl N! loads anyway)
  /save PATH      export the KV state       /load PATH   import a KV state
  /restart        restart the engine        /quit        leave (Ctrl+D too)
Ctrl+C stops a reply or a summary."""


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="chat in the terminal (streams tokens)")
    p.add_argument("--conversation", default="new", help="conversation id to continue, or new")
    p.add_argument("--system", default="", help="system prompt (default: the model's own)")
    p.add_argument("--stats", action="store_true", help="print statistics after every reply")
    p.add_argument(
        "--mcp",
        type=Path,
        help="an mcp.json: offer its MCP servers' tools (each call asks first; /tools)",
    )
    p.add_argument(
        "--server",
        help="an OpenAI-compatible server's URL (llama.cpp's server, vLLM, Ollama, LM Studio); "
        "--model then names the server's model (default: its first)",
    )
    names: list[str] = []
    for title, cls, skip in (
        ("model", LoadSettings, ()),
        ("sampling", SamplingSettings, ("ignore_eos",)),
        ("context", ContextPolicy, ()),
    ):
        names += add_options(p.add_argument_group(title), cls, skip=skip)
    p.set_defaults(func=run, settings_fields=names)
    c = sub.add_parser("conversations", help="list or search stored conversations")
    c.add_argument("--search", help="full-text search")
    c.set_defaults(func=run_conversations)


def _say_lock(event: LockEvent) -> None:
    """A wait for another process's lock on the database, told on its own line."""
    print(f"note: {event.message}", file=sys.stderr, flush=True)


def _open_store() -> Any:
    """The user's conversations; a damaged database is recovered and said so, once;
    another process's lock is waited out, then a one-line error."""
    try:
        store, recovery = open_default_store(on_lock=_say_lock)
    except (NewerStoreError, StoreError, OSError) as exc:
        log.error("The conversations could not be opened: %s", exc, exc_info=exc)
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    if recovery is not None:
        print(f"note: {recovery.message()}", file=sys.stderr)
    return store


def run_conversations(args: argparse.Namespace) -> int:
    store = _open_store()
    try:
        if args.search:
            for conv, msg, snippet in store.search(args.search):
                print(f"{conv.id:5}  {conv.title[:40]:40}  {msg.role:9} {snippet}")
        else:
            for conv in store.conversations():
                n = len(store.path(conv.id))
                print(f"{conv.id:5}  {conv.title[:50]:50}  {n} messages")
    except StoreError as exc:  # damage met while reading
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    return 0


def _print_stats(stats: Any, out: Any) -> None:
    out.write(
        f"[{stats.tokens_prefilled} prefilled, {stats.tokens_reused} reused, "
        f"ttft {stats.ttft_s * 1000:.0f} ms, {stats.decode_tokens} tokens at "
        f"{stats.decode_tok_s:.1f} tok/s, {stats.kv_tokens}/{stats.n_ctx} ctx, "
        f"{stats.stop_reason}"
        + (f", drafted {stats.drafted}, accepted {stats.accepted}" if stats.drafted else "")
        + "]\n"
        + (f"[{stats.note}]\n" if stats.note else "")
    )


def _engine(args: argparse.Namespace) -> Engine | None:
    """A remote engine for ``--server`` (its key from ``VLLMCHAT_API_KEY``), else the local one."""
    if not args.server:
        return None
    warning = url_warning(args.server)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    key = os.environ.get("VLLMCHAT_API_KEY")  # else the keyring's
    return open_server(args.server, args.model_path, key=key, n_ctx=args.n_ctx)


def _app_settings(args: argparse.Namespace) -> AppSettings:
    """The settings given as options, on the app's defaults; the model defaults to the demo."""
    values = given(args, args.settings_fields)
    if args.server:
        values["model_path"] = ""  # the server's model is named by --model, not a file
    elif "model_path" not in values:
        values["model_path"] = str(demo_model_path())
    return AppSettings.of(system_prompt=args.system, **values)


class _Quit(Exception):
    """SIGTERM (a logout, ``kill``) while waiting for input: leave like /quit."""


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    store = _open_store()
    app = ChatApp(store, KVStateCache(kv_cache_dir()), engine=_engine(args))
    try:
        settings = _app_settings(args)
        if args.conversation == "new":
            conv = store.create(system_prompt=args.system)
        else:
            conv = store.conversation(int(args.conversation))
    except (StoreError, ValueError, EngineError) as exc:
        log.warning("The chat could not start: %s", exc, exc_info=exc)
        print(f"error: {exc}", file=sys.stderr)
        store.close()
        return 2
    state: dict[str, Any] = {"last": None, "streaming": False, "quit": False, "tools": None}
    if args.mcp:
        manager = open_tools(args.mcp)
        if manager is None:
            app.shutdown()
            store.close()
            return 2
        state["tools"] = (manager, ApprovalPolicy())
        app.use_tools(*state["tools"])
    app.open_conversation(conv.id)
    loaded = _load(app, settings)
    if loaded is None:
        app.shutdown()
        store.close()
        if state["tools"] is not None:
            state["tools"][0].close()
        return 2
    info = loaded.info
    restored = loaded.restored_tokens
    out.write(
        f"{info.name} · {info.architecture} · {info.chat_template} template · "
        f"n_ctx {info.n_ctx} · loaded in {info.load_s:.2f}s · conversation {conv.id}"
        + (f" ({restored} tokens of KV cache restored)" if restored else "")
        + ". /help for commands.\n"
    )
    note = identity_note(
        info.exact_verify,
        info.exact_verify_reason,
        speculation=settings.sampler.speculation,
        temperature=settings.sampler.temperature,
    )
    if note:
        out.write(note + "\n")

    def on_term(*_: object) -> None:
        state["quit"] = True
        if state["streaming"]:
            app.stop()  # the reply is kept, marked partial; then leave
        else:
            raise _Quit

    signal.signal(signal.SIGINT, lambda *_: app.stop())
    signal.signal(signal.SIGTERM, on_term)
    ahead = WhileReading(app)
    try:
        while not state["quit"]:
            out.write("you> ")
            out.flush()
            line = sys.stdin.readline()
            _show(iter(ahead.finish()), out, False, state)
            if not line:
                out.write("\n")
                return 0
            text = line.rstrip("\n")
            if text.startswith("/"):
                if _command(text, app, state, out):
                    return 0
            elif text.strip():
                state["streaming"] = True
                try:
                    _show(app.send(text), out, args.stats, state)
                finally:
                    state["streaming"] = False
                ahead.start()
        return 0
    except _Quit:
        return 0
    except StoreError as exc:  # the lock was held past the wait, or damage met in use
        print(f"\nerror: {exc}", file=sys.stderr)
        return 2
    finally:
        ahead.finish()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        app.shutdown()
        store.close()
        if state["tools"] is not None:
            state["tools"][0].close()


class WhileReading:
    """The summary the next turn needs, written on a thread while the user types;
    what it reports is shown when the next line arrives (never over the prompt)."""

    def __init__(self, app: ChatApp) -> None:
        self.app = app
        self.typed = threading.Event()
        self.events: list[Any] = []
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.typed.clear()
        self.thread = threading.Thread(target=self._run, name="vllmchat-ahead", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.events.extend(self.app.prepare_next(busy=self.typed.is_set))
        except Exception as exc:  # shown with the next turn, never a traceback
            log.error("Summarizing ahead failed", exc_info=exc)
            self.events.append(ErrorEvent(ErrorKind.INTERNAL, f"Summarizing ahead failed: {exc!r}"))

    def finish(self) -> list[Any]:
        """Stop within a token and hand over what was reported."""
        self.typed.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        events, self.events = self.events, []
        return events


def _load(app: ChatApp, settings: AppSettings) -> Loaded | None:
    return _loaded(app.load(settings))


def _loaded(events: Iterator[Any]) -> Loaded | None:
    """The ``Loaded`` of a load, or None (its reason printed)."""
    for event in events:
        if isinstance(event, LoadFailed):
            print(f"error: {event.message} {event.fix}".strip(), file=sys.stderr)
            return None
        if isinstance(event, PlacementNeedsConfirmation):
            print(f"{event.message} Repeat the command with ! to load it anyway.")
            return None
        if isinstance(event, PlacementFellBack):
            print(f"note: {event.message}")
        if isinstance(event, Loaded):
            return event
    return None


def _show(events: Iterator[Any], out: Any, show_stats: bool, state: dict[str, Any]) -> None:
    started = False
    for event in events:
        if show_tool_event(event, out, sys.stdin.readline):
            started = False  # the model's next step starts a new line
        elif isinstance(event, SummaryEvent):
            out.write(f"[summary {event.status}: {event.message}]\n")
        elif isinstance(event, PromptPlanEvent) and event.dropped_messages:
            out.write(f"[context: the {event.dropped_messages} oldest messages are left out]\n")
        elif isinstance(event, PrefillProgressEvent):
            out.write(f"\r[reading prompt {event.done}/{event.total}]")
        elif isinstance(event, ThinkingEvent) and not state.get("thinking"):
            state["thinking"] = True
            out.write("[thinking…]")
        elif isinstance(event, ThoughtFor):
            state["thinking"] = False
            out.write(f"\r[thought for {event.seconds:.0f} s]\n")
        elif isinstance(event, TokenEvent):
            if not started:
                out.write("ai> ")
                started = True
            out.write(event.text)
        elif isinstance(event, DoneEvent):
            out.write(" [stopped]\n" if event.stop_reason == "stopped" else "\n")
            state["last"] = event.stats
            if show_stats:
                _print_stats(event.stats, out)
        elif isinstance(event, ErrorEvent):
            out.write(f"\nerror: {event.message} {event.fix}\n")
        elif isinstance(event, EngineDied):
            out.write("(/restart brings the engine back; the conversation is kept)\n")
        elif isinstance(event, StorageWarning):
            out.write(f"[disk: {event.message}]\n")
        out.flush()


def _command(text: str, app: ChatApp, state: dict[str, Any], out: Any) -> bool:
    name, _, arg = text.partition(" ")
    session, engine = app.session, app.engine
    assert session is not None
    try:
        if name in ("/quit", "/exit"):
            return True
        if name == "/help":
            out.write(HELP + "\n" + (TOOLS_HELP + "\n" if state["tools"] else ""))
        elif name == "/tools":
            if state["tools"] is None:
                out.write("no tools: start the chat with --mcp CONFIG\n")
            else:
                manager, policy = state["tools"]
                tools_command(arg, manager, policy, out)
        elif name == "/history":
            info = session.context_info()
            store, conv = session.store, session.conversation_id
            summary = store.summary_for(conv, store.path(conv))
            if summary:
                out.write(f"summary: {summary.content}\n")
            verbatim = False
            for number, m in enumerate(store.path(conv), 1):
                verbatim = verbatim or m.id == info.first_message_id
                mark = "📌" if m.pinned else "  " if verbatim else "× "
                out.write(f"{number:3} {mark}{m.role}: {m.content[:100]}\n")
            out.write(
                f"({info.prompt_tokens} of {info.n_ctx} tokens, pinned {info.pinned_tokens}; "
                "× = summarized or left out, 📌 = pinned: word for word in every prompt)\n"
            )
        elif name in ("/pin", "/unpin"):
            branch = session.store.path(session.conversation_id)
            number = int(arg)
            if not 1 <= number <= len(branch):
                raise ValueError(f"there is no message {number} (/history numbers them)")
            message = session.store.set_pinned(branch[number - 1].id, name == "/pin")
            word = "pinned: word for word in every prompt" if message.pinned else "unpinned"
            out.write(f"message {number} {word}\n")
        elif name in ("/facts", "/remember", "/fact", "/forget"):
            _facts_command(name, arg, app, out)
        elif name == "/summary":
            _show(app.summarize(), out, False, state)
        elif name == "/export":
            path = export_file(session.store, session.conversation_id, arg.strip())
            out.write(f"exported to {path}\n")
        elif name == "/stats":
            _print_stats(state["last"], out) if state["last"] else out.write("no turn yet\n")
        elif name == "/restart":
            restarted = next((e for e in app.restart() if isinstance(e, Loaded | LoadFailed)), None)
            if isinstance(restarted, Loaded):
                out.write(
                    "engine restarted; the conversation is kept"
                    f" ({restarted.restored_tokens} tokens of KV cache restored)\n"
                )
            elif restarted is not None:
                out.write(f"error: {restarted.message} {restarted.fix}\n")
        elif name in ("/ngl", "/moe"):
            if not arg.strip(" !").isdigit():
                raise ValueError(f"{name} takes a number of layers, e.g. {name} 12 (! to confirm)")
            n, confirmed = int(arg.strip(" !")), arg.strip().endswith("!")
            now = app.settings.load.placement
            placement = (
                replace(now, n_gpu_layers=n) if name == "/ngl" else replace(now, n_cpu_moe=n)
            )
            loaded = _loaded(app.set_placement(placement, confirmed=confirmed))
            if loaded is not None and loaded.reload is not None:
                result = loaded.reload
                kept = "KV cache kept" if result.restored else f"re-prefill: {result.reason}"
                out.write(f"reloaded in {result.seconds:.2f}s ({kept})\n")
        elif name == "/save":
            r = engine.export_state(arg.strip())
            out.write(f"saved {r.tokens} tokens ({r.bytes / 2**20:.1f} MiB)\n")
        elif name == "/load":
            out.write(f"restored {engine.import_state(arg.strip()).tokens} tokens\n")
        else:
            out.write(f"unknown command {name}; /help lists them\n")
    except (EngineError, StoreError, ValueError, OSError) as exc:
        log.warning("%s failed: %s", name, exc, exc_info=exc)
        out.write(f"error: {exc}\n")
    return False


def _facts_command(name: str, arg: str, app: ChatApp, out: Any) -> None:
    """List the conversation's facts, after adding, rewording or removing one."""
    conv = app.conversation_id
    assert conv is not None
    if name == "/remember":
        app.facts.add(conv, arg)
    elif name in ("/fact", "/forget"):
        number, _, text = arg.strip().partition(" ")
        facts = app.facts.facts(conv)
        if not number.isdigit() or not 1 <= int(number) <= len(facts):
            raise ValueError(f"there is no fact {number or '(no number)'} (/facts numbers them)")
        fact = facts[int(number) - 1]
        if name == "/forget":
            app.facts.delete(fact.id)
        else:
            app.facts.edit(fact.id, text)
    facts = app.facts.facts(conv)
    for n, fact in enumerate(facts, 1):
        mark = "  (yours)" if fact.edited or fact.message_id is None else ""
        out.write(f"{n:3} {fact.text}{mark}\n")
    if not facts:
        out.write("no facts yet (/remember TEXT adds one)\n")
