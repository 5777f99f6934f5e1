"""``vllmchat chat``: streaming chat in the terminal."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from vllmchat.core.engine import (
    DoneEvent,
    EngineClient,
    EngineError,
    ErrorEvent,
    PrefillProgressEvent,
    TokenEvent,
)
from vllmchat.core.settings import SamplingSettings

HELP = """commands:
  /stats          last turn's statistics
  /ngl N          reload live with N GPU layers (the conversation's KV cache is kept)
  /save PATH      export the KV state       /load PATH   import a KV state
  /reset          start a new conversation  /restart     restart the engine
  /quit           leave (Ctrl+D also; Ctrl+C stops a reply)"""


def register(sub: Any) -> None:
    from vllmchat.cli import add_load_options

    p = sub.add_parser("chat", help="chat in the terminal (streams tokens)")
    add_load_options(p)
    p.add_argument("--system", default="You are a helpful assistant.", help="system prompt")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--seed", type=int, default=-1)
    p.add_argument("--stats", action="store_true", help="print statistics after every reply")
    p.set_defaults(func=run)


def _print_stats(stats: Any, out: Any) -> None:
    out.write(
        f"[{stats.tokens_prefilled} prefilled, {stats.tokens_reused} reused, "
        f"ttft {stats.ttft_s * 1000:.0f} ms, {stats.decode_tokens} tokens at "
        f"{stats.decode_tok_s:.1f} tok/s, {stats.kv_tokens}/{stats.n_ctx} ctx, "
        f"{stats.stop_reason}]\n"
    )


def run(args: argparse.Namespace) -> int:
    from vllmchat.cli import load_settings_from

    out = sys.stdout
    settings = load_settings_from(args)
    sampling = SamplingSettings(
        temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed
    )
    client = EngineClient()
    try:
        info = client.load(settings)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        client.close()
        return 2
    out.write(
        f"{info.name} · {info.architecture} · {info.chat_template} template · "
        f"n_ctx {info.n_ctx} · loaded in {info.load_s:.2f}s. /help for commands.\n"
    )
    messages: list[dict[str, str]] = [{"role": "system", "content": args.system}]
    last: Any = None
    signal.signal(signal.SIGINT, lambda *_: client.stop())
    try:
        while True:
            out.write("you> ")
            out.flush()
            line = sys.stdin.readline()
            if not line:
                out.write("\n")
                return 0
            text = line.rstrip("\n")
            if text.startswith("/"):
                if _command(text, client, messages, last, out):
                    return 0
                continue
            if not text.strip():
                continue
            messages.append({"role": "user", "content": text})
            last = _stream_reply(client, messages, sampling, out, args.stats)
    finally:
        client.close()


def _stream_reply(
    client: EngineClient,
    messages: list[dict[str, str]],
    sampling: SamplingSettings,
    out: Any,
    show_stats: bool,
) -> Any:
    out.write("ai> ")
    out.flush()
    for event in client.chat(messages, sampling):
        if isinstance(event, TokenEvent):
            out.write(event.text)
            out.flush()
        elif isinstance(event, PrefillProgressEvent):
            out.write(f"\r[reading prompt {event.done}/{event.total}]")
            out.flush()
        elif isinstance(event, DoneEvent):
            messages.append({"role": "assistant", "content": event.text})
            out.write(" [stopped]\n" if event.stop_reason == "stopped" else "\n")
            if show_stats:
                _print_stats(event.stats, out)
            return event.stats
        elif isinstance(event, ErrorEvent):
            if event.partial_text:
                messages.append({"role": "assistant", "content": event.partial_text})
            else:
                messages.pop()
            out.write(f"\nerror: {event.message} {event.fix}\n")
    return None


def _command(
    text: str, client: EngineClient, messages: list[dict[str, str]], last: Any, out: Any
) -> bool:
    name, _, arg = text.partition(" ")
    try:
        if name in ("/quit", "/exit"):
            return True
        if name == "/help":
            out.write(HELP + "\n")
        elif name == "/stats":
            _print_stats(last, out) if last else out.write("no turn yet\n")
        elif name == "/reset":
            del messages[1:]
            out.write("new conversation\n")
        elif name == "/restart":
            client.restart()
            out.write("engine restarted; the conversation is kept\n")
        elif name == "/ngl":
            result = client.reload(client.settings.with_changes(n_gpu_layers=int(arg)))
            kept = "KV cache kept" if result["restored"] else f"re-prefill: {result['reason']}"
            out.write(f"reloaded in {result['seconds']:.2f}s ({kept})\n")
        elif name == "/save":
            r = client.export_state(arg.strip())
            out.write(f"saved {r['tokens']} tokens ({r['bytes'] / 2**20:.1f} MiB)\n")
        elif name == "/load":
            out.write(f"restored {client.import_state(arg.strip())['tokens']} tokens\n")
        else:
            out.write(f"unknown command {name}; /help lists them\n")
    except (EngineError, ValueError) as exc:
        out.write(f"error: {exc}\n")
    return False
