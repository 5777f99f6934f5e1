"""``vllmchat``: the window, or one of the terminal front end's commands.

With no command the window opens; where it cannot (no display, or no Qt
platform plugin that can load, or Qt missing) the terminal chat starts instead,
after saying why.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections.abc import Sequence


def _wants_window(argv: list[str]) -> bool:
    return not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"))


def main(argv: Sequence[str] | None = None) -> int:
    multiprocessing.freeze_support()
    args = sys.argv[1:] if argv is None else list(argv)
    if _wants_window(args):
        return _window(args)
    from vllmchat.cli import main as cli_main

    return cli_main(args)


def _terminal_chat(args: list[str], why: str) -> int:
    from vllmchat.cli import main as cli_main

    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--model")
    known, _ = model.parse_known_args(args)
    print(f"{why}\nStarting the terminal chat (vllmchat chat).", file=sys.stderr)
    return cli_main(["chat", *(["--model", known.model] if known.model else [])])


def _window(args: list[str]) -> int:
    from vllmchat.core.machine.qt_runtime import window_blocker

    if {"--self-test", "--exit-after-show"} & set(args):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    headless_ok = "--install-desktop" in args
    blocker = None if headless_ok else window_blocker()
    if blocker:
        # Without a loadable platform plugin Qt would abort the process: say why instead.
        return _terminal_chat(args, blocker)
    try:
        from vllmchat.ui.app import run_app
    except ImportError as exc:
        return _terminal_chat(args, f"The desktop UI cannot load ({exc}).")
    return run_app(args)


if __name__ == "__main__":
    sys.exit(main())
