"""``vllmchat chat``: streaming chat in the terminal, stored like the app's conversations.

Here: the options, starting the application layer, the loop that reads lines. The rest
of the terminal chat is in this folder: the slash commands (``commands``), what is
printed of the events (``output``), MCP tools (``tools``), files attached (``attach``),
``--voice`` (``voice``) and the glyphs the terminal can show (``glyphs``). A new chat is
stored at its first message."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from vllmchat.cli.chat import attach as attaching
from vllmchat.cli.chat.commands import command
from vllmchat.cli.chat.output import loaded, show
from vllmchat.cli.chat.tools import open_tools
from vllmchat.cli.chat.voice import next_line, open_voice
from vllmchat.cli.options import add_options, given
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.engines import open_server
from vllmchat.core.app.errors import LockEvent, StoreError
from vllmchat.core.app.start import CannotStart, Started, open_app
from vllmchat.core.app_settings import AppSettings
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.demo_model import demo_model_path
from vllmchat.core.engine.events import (
    EngineError,
    ErrorEvent,
    ErrorKind,
)
from vllmchat.core.engine.exactness import identity_note
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.engine.remote.servers import url_warning
from vllmchat.core.settings import LoadSettings, SamplingSettings

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="chat in the terminal (streams tokens)")
    p.add_argument(
        "--conversation",
        type=conversation_number,
        default=None,
        metavar="ID",
        help="the number of a conversation to continue (`vllmchat conversations` lists them); "
        "default: a new one",
    )
    p.add_argument("--system", default="", help="system prompt (default: the model's own)")
    p.add_argument("--stats", action="store_true", help="print statistics after every reply")
    p.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="PATH",
        help="attach a document (text, Markdown, code, PDF, .docx) to the first message; "
        "repeat for more",
    )
    p.add_argument(
        "--embedding-model",
        default="",
        metavar="GGUF",
        help="an embedding model: passages of a large document are ranked by FTS5 and by "
        "embeddings (reciprocal rank fusion)",
    )
    p.add_argument(
        "--mcp",
        type=Path,
        help="an mcp.json: offer its MCP servers' tools (each call asks first; /tools)",
    )
    p.add_argument(
        "--tool-choice",
        choices=("auto", "required"),
        default="auto",
        help="required: each turn begins with a tool call (for a model that does not call "
        "tools by itself; its template has no tool format)",
    )
    p.add_argument(
        "--voice",
        action="store_true",
        help="speak each message (Enter or a pause ends it) and hear the replies; "
        "Enter stops the speech; typed lines still work",
    )
    p.add_argument(
        "--speech-model",
        metavar="NAME",
        help="with --voice: the Whisper model that hears you, kept for next time, e.g. "
        "whisper-small (mishears less, slower); `vllmchat voice` lists and downloads them",
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


def conversation_number(text: str) -> int | None:
    """``--conversation``'s value: a conversation's number, or None for "new"."""
    if text.strip().lower() == "new":
        return None
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a conversation's number: give one that `vllmchat conversations` "
            "lists, or leave it out for a new conversation"
        )
    return number


def _say_lock(event: LockEvent) -> None:
    """A wait for another process's lock on the database, told on its own line."""
    print(f"note: {event.message}", file=sys.stderr, flush=True)


def _start(engine: Engine | None = None) -> Started | None:
    """The application on the user's conversations; a damaged database is recovered and
    said so, once; another process's lock is waited out, then a one-line error (None)."""
    started = open_app(engine=engine, on_lock=_say_lock)
    if isinstance(started, CannotStart):
        print(f"error: {started.message}", file=sys.stderr)
        return None
    if started.recovered:
        print(f"note: {started.recovered}", file=sys.stderr)
    return started


def run_conversations(args: argparse.Namespace) -> int:
    started = _start()
    if started is None:
        return 2
    conversations = started.app.conversations
    try:
        if args.search:
            for hit in conversations.search(args.search):
                conv, role = hit.conversation, hit.message.role
                print(f"{conv.id:5}  {conv.title[:40]:40}  {role:9} {hit.snippet}")
        else:
            for conv in conversations.list():
                n = len(conversations.branch(conv.id))
                print(f"{conv.id:5}  {conv.title[:50]:50}  {n} messages")
    except StoreError as exc:  # damage met while reading
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        started.close()
    return 0


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
    return AppSettings.of(system_prompt=args.system, embedding_model=args.embedding_model, **values)


class _Quit(Exception):
    """SIGTERM (a logout, ``kill``) while waiting for input: leave like /quit."""


def _open(app: ChatApp, args: argparse.Namespace) -> str:
    """Open ``--conversation``, or start a new chat (stored at its first message);
    why not, when it cannot be."""
    if args.conversation is None:
        app.new_chat(system_prompt=args.system)
        return ""
    if app.conversations.conversation(args.conversation) is None:
        return (
            f"There is no conversation {args.conversation} "
            "(`vllmchat conversations` lists them; leave out --conversation for a new one)."
        )
    app.open_conversation(args.conversation)
    return ""


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        settings = _app_settings(args)
        engine = _engine(args)
    except (ValueError, EngineError) as exc:
        log.warning("The chat could not start: %s", exc, exc_info=exc)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    opened = _start(engine)
    if opened is None:
        return 2
    app = opened.app
    state: dict[str, Any] = {"last": None, "streaming": False, "quit": False, "tools": None}
    if args.mcp:
        tools = open_tools(app, args.mcp, args.tool_choice, out)
        if tools is None:
            opened.close()
            return 2
        state["tools"] = tools
    why_not = _open(app, args)
    started = None if why_not else loaded(app.load(settings))
    if started is None:
        if why_not:
            print(f"error: {why_not}", file=sys.stderr)
        opened.close()
        if state["tools"] is not None:
            state["tools"].close()
        return 2
    info = started.info
    restored = started.restored_tokens
    which = f"conversation {app.conversation_id}" if app.conversation_id else "a new conversation"
    out.write(
        f"{info.name} · {info.architecture} · {info.chat_template} template · "
        f"n_ctx {info.n_ctx} · loaded in {info.load_s:.2f}s · {which}"
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
    for path in args.attach:
        attaching.attach(app, path, out)

    def on_term(*_: object) -> None:
        state["quit"] = True
        if state["streaming"]:
            app.stop()  # the reply is kept, marked partial; then leave
        else:
            raise _Quit

    signal.signal(signal.SIGINT, lambda *_: app.stop())
    signal.signal(signal.SIGTERM, on_term)
    ahead = WhileReading(app)
    if getattr(args, "speech_model", None) is not None:
        show(app.configure(voice_recogniser=args.speech_model), out, False, state)
    voice = open_voice(app, out, state) if args.voice else None
    try:
        while not state["quit"]:
            line = next_line(voice, out)
            show(iter(ahead.finish()), out, False, state)
            if line is None:
                out.write("\n")
                return 0
            text = line.rstrip("\n")
            if text.startswith("/"):
                if command(text, app, state, out):
                    return 0
            elif text.strip():
                state["streaming"] = True
                try:
                    if voice is not None and voice.speaks:
                        voice.spoken(app.send(text), lambda e: show(e, out, args.stats, state))
                    else:
                        show(app.send(text), out, args.stats, state)
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
        opened.close()
        if state["tools"] is not None:
            state["tools"].close()


class WhileReading:
    """The title after the first reply and the summary the next turn needs, made on a
    thread while the user types; what it reports is shown when the next line arrives
    (never over the prompt)."""

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
            reading = self.app.reading
            self.events.extend(reading.make_title(busy=self.typed.is_set, after_first_reply=True))
            self.events.extend(reading.prepare_next(busy=self.typed.is_set))
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
