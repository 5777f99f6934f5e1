"""The terminal front end: ``vllmchat chat``, ``models``, ``doctor``, ``tools``, ``bench ...``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from vllmchat import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllmchat", description=__doc__)
    parser.add_argument("--version", action="version", version=f"vllmchat {__version__}")
    sub = parser.add_subparsers(dest="command")
    from vllmchat.cli import bench, chat, doctor, models, serve, tools, transcribe, tune

    chat.register(sub)
    models.register(sub)
    doctor.register(sub)
    bench.register(sub)
    tune.register(sub)
    tools.register(sub)
    serve.register(sub)
    transcribe.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``vllmchat chat``, ``models``, ``doctor``, ``bench``, ...)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if getattr(args, "func", None) is None:
        build_parser().print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The output's reader has gone (``vllmchat conversations | head -5``): leave quietly,
    with nothing more written to the closed pipe (not even at exit's flush)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0
