"""``vllmchat``: the window, or one of the terminal front end's commands.

With no command the window opens; where it cannot (no display, or the window
front end's libraries missing) the terminal chat starts instead, after saying why.
Either way failures are logged, with their tracebacks, to the log file
(``vllmchat doctor`` names it).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections.abc import Sequence

# What ``vllmchat --help`` says above the commands, in plain words.
DESCRIPTION = (
    "Chat with GGUF models on this machine (llama.cpp). With no command the window "
    "opens, or the terminal chat where there is no display; the commands below run "
    "in the terminal."
)


def _wants_window(argv: list[str]) -> bool:
    return not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"))


def main(argv: Sequence[str] | None = None) -> int:
    multiprocessing.freeze_support()
    _start_log()
    args = sys.argv[1:] if argv is None else list(argv)
    if _wants_window(args):
        return _window(args)
    if args[:1] in (["-h"], ["--help"]):
        return _help()
    if args[:2] == ["bench", "ui"] and "-h" not in args and "--help" not in args:
        return _bench_window(args[2:])
    from vllmchat.cli import main as cli_main

    return cli_main(args)


def _help() -> int:
    """The commands, under a plain description of the program."""
    from vllmchat.cli import build_parser

    parser = build_parser()
    parser.description = DESCRIPTION
    parser.print_help()
    return 0


def _start_log() -> None:
    """The rotating log file, for either front end and the engine processes they start."""
    from vllmchat.core.machine import logs
    from vllmchat.core.paths import log_dir

    logs.configure(log_dir())
    logs.log_uncaught()


def _terminal_chat(args: list[str], why: str) -> int:
    from vllmchat.cli import main as cli_main

    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--model")
    known, _ = model.parse_known_args(args)
    print(f"{why}\nStarting the terminal chat (vllmchat chat).", file=sys.stderr)
    return cli_main(["chat", *(["--model", known.model] if known.model else [])])


def _bench_window(args: list[str]) -> int:
    """``vllmchat bench ui``: the window's benchmark belongs to the window front end."""
    import json

    from vllmchat.ui.window.bench_ui import run

    result = run()
    if "--json" in args:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:32} {value}")
    return 0


def _window(args: list[str]) -> int:
    from vllmchat.ui.window.launch import start_window

    started = start_window(args)
    return started if isinstance(started, int) else _terminal_chat(args, started)


if __name__ == "__main__":
    sys.exit(main())
