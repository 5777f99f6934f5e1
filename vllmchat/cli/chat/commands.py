"""The slash commands of ``vllmchat chat``: the history, pins, facts, summaries,
export, statistics, placement, KV state files and restarts."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from vllmchat.cli.chat import attach as attaching
from vllmchat.cli.chat.glyphs import LEFT_OUT, PINNED, glyph
from vllmchat.cli.chat.output import loaded, print_stats, show, terminal_fix
from vllmchat.cli.chat.tools import TOOLS_HELP, tools_command
from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.errors import StoreError
from vllmchat.core.app.events import EditRefused, Loaded, LoadFailed
from vllmchat.core.app.exporting import export_conversation
from vllmchat.core.engine.events import EngineError

log = logging.getLogger(__name__)
HELP = f"""commands:
  /history        the messages the model is given, and the summary (numbered)
  /pin N          keep message N word for word in every prompt (/unpin N undoes it)
  /summary        summarize the older turns now
  /facts          the facts kept word for word through summaries (numbered)
  /remember TEXT  add a fact   /fact N TEXT  reword fact N   /forget N  remove it
  /export PATH    write the conversation to PATH (.md or .json)
{attaching.HELP}
  /stats          last turn's statistics
  /ngl N          reload live with N GPU layers (the conversation's KV cache is kept)
  /moe N          reload live with the experts of N layers in RAM (mixtures of experts)
                  (past the memory estimate's bound they ask first: /ngl N! loads anyway)
  /save PATH      export the KV state       /load PATH   import a KV state
  /restart        restart the engine        /quit        leave (Ctrl+D too)
Ctrl+C stops a reply or a summary."""


# What a new chat cannot do before its first message (nothing is stored yet).
NEEDS_MESSAGES = (
    "/history",
    "/pin",
    "/unpin",
    "/summary",
    "/export",
    "/fact",
    "/forget",
)
NOTHING_YET = "nothing yet: the conversation starts with your first message\n"


def command(text: str, app: ChatApp, state: dict[str, Any], out: Any) -> bool:
    name, _, arg = text.partition(" ")
    engine = app.engine
    try:
        if name in ("/quit", "/exit"):
            return True
        if name == "/help":
            out.write(HELP + "\n" + (TOOLS_HELP + "\n" if state["tools"] else ""))
        elif name == "/tools":
            if state["tools"] is None:
                out.write("no tools: start the chat with --mcp CONFIG\n")
            else:
                tools_command(arg, app, state["tools"], out)
        elif name in NEEDS_MESSAGES and app.session is None:
            out.write(NOTHING_YET)
        elif name == "/history":
            _history(app, out)
        elif name in ("/pin", "/unpin"):
            _pin(name, arg, app, out)
        elif name in ("/facts", "/remember", "/fact", "/forget"):
            _facts_command(name, arg, app, out)
        elif name == "/attach":
            attaching.attach(app, arg, out)
        elif name == "/passages":
            attaching.passages(app, out)
        elif name == "/summary":
            show(app.summarize(), out, False, state)
        elif name == "/export":
            path = export_conversation(app, app.conversation_id or 0, arg.strip())
            out.write(f"exported to {path}\n")
        elif name == "/stats":
            print_stats(state["last"], out) if state["last"] else out.write("no turn yet\n")
        elif name == "/restart":
            _restart(app, out)
        elif name in ("/ngl", "/moe"):
            _place(name, arg, app, out)
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


def _history(app: ChatApp, out: Any) -> None:
    """The messages the model is given, numbered, and the summary of those it is not."""
    session, conversations = app.session, app.conversations
    assert session is not None
    info = session.context_info()
    conv = session.conversation_id
    summary = conversations.current_summary(conv)
    if summary:
        out.write(f"summary: {summary.content}\n")
    verbatim = False
    for number, m in enumerate(conversations.branch(conv), 1):
        verbatim = verbatim or m.id == info.first_message_id
        mark = glyph(out, PINNED) if m.pinned else "  " if verbatim else glyph(out, LEFT_OUT)
        out.write(f"{number:3} {mark}{m.role}: {m.content[:100]}\n")
    out.write(
        f"({info.prompt_tokens} of {info.n_ctx} tokens, pinned {info.pinned_tokens}; "
        f"{glyph(out, LEFT_OUT).strip()} = summarized or left out, {glyph(out, PINNED).strip()} "
        "= pinned: word for word in every prompt)\n"
    )


def _pin(name: str, arg: str, app: ChatApp, out: Any) -> None:
    """Pin message N of ``/history`` (word for word in every prompt), or unpin it."""
    branch = app.conversations.branch(app.conversation_id or 0)
    number = int(arg)
    if not 1 <= number <= len(branch):
        raise ValueError(f"there is no message {number} (/history numbers them)")
    pinned = app.conversations.pin(branch[number - 1].id, name == "/pin")
    if isinstance(pinned, EditRefused):
        raise ValueError(pinned.message)
    word = "pinned: word for word in every prompt" if pinned.pinned else "unpinned"
    out.write(f"message {number} {word}\n")


def _restart(app: ChatApp, out: Any) -> None:
    restarted = next((e for e in app.restart() if isinstance(e, Loaded | LoadFailed)), None)
    if isinstance(restarted, Loaded):
        out.write(
            "engine restarted; the conversation is kept"
            f" ({restarted.restored_tokens} tokens of KV cache restored)\n"
        )
    elif restarted is not None:
        out.write(f"error: {restarted.message} {terminal_fix(restarted.kind, restarted.fix)}\n")


def _place(name: str, arg: str, app: ChatApp, out: Any) -> None:
    """``/ngl N`` and ``/moe N``: reload live with the weights placed anew."""
    if not arg.strip(" !").isdigit():
        raise ValueError(f"{name} takes a number of layers, e.g. {name} 12 (! to confirm)")
    n, confirmed = int(arg.strip(" !")), arg.strip().endswith("!")
    now = app.settings.load.placement
    placement = replace(now, n_gpu_layers=n) if name == "/ngl" else replace(now, n_cpu_moe=n)
    placed = loaded(app.set_placement(placement, confirmed=confirmed))
    if placed is not None and placed.reload is not None:
        result = placed.reload
        kept = "KV cache kept" if result.restored else f"re-prefill: {result.reason}"
        out.write(f"reloaded in {result.seconds:.2f}s ({kept})\n")


def _facts_command(name: str, arg: str, app: ChatApp, out: Any) -> None:
    """List the conversation's facts, after adding, rewording or removing one."""
    conversations, conv = app.conversations, app.conversation_id or 0
    changed: Any = None
    if name == "/remember":
        attaching.start_new_chat(app)  # a fact given first starts the chat
        conv = app.conversation_id or 0
        changed = conversations.add_fact(conv, arg)
    elif name in ("/fact", "/forget"):
        number, _, text = arg.strip().partition(" ")
        facts = conversations.facts(conv)
        if not number.isdigit() or not 1 <= int(number) <= len(facts):
            raise ValueError(f"there is no fact {number or '(no number)'} (/facts numbers them)")
        fact = facts[int(number) - 1]
        if name == "/forget":
            changed = conversations.delete_fact(fact.id)
        else:
            changed = conversations.edit_fact(fact.id, text)
    if isinstance(changed, EditRefused):
        raise ValueError(changed.message)
    facts = conversations.facts(conv)
    for n, fact in enumerate(facts, 1):
        mark = "  (yours)" if fact.edited or fact.message_id is None else ""
        out.write(f"{n:3} {fact.text}{mark}\n")
    if not facts:
        out.write("no facts yet (/remember TEXT adds one)\n")
