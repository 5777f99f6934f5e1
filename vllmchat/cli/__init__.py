"""The terminal front end: ``vllmchat chat``, ``models``, ``doctor``, ``bench ...``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from vllmchat import __version__


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """Model and load-setting options shared by commands that load a model."""
    parser.add_argument("--model", help="path of a .gguf file (default: the demo model)")
    parser.add_argument("--n-gpu-layers", type=int, default=0, help="layers to offload to GPU")
    parser.add_argument("--n-ctx", type=int, default=4096, help="context size in tokens")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads")
    parser.add_argument("--n-batch", type=int, default=512)
    parser.add_argument("--flash-attn", action="store_true")
    parser.add_argument("--type-k", default="f16", choices=["f16", "q8_0", "q4_0"])
    parser.add_argument("--type-v", default="f16", choices=["f16", "q8_0", "q4_0"])
    parser.add_argument("--no-mmap", action="store_true")


def load_settings_from(args: argparse.Namespace):
    """``LoadSettings`` from parsed options."""
    from vllmchat.core.demo_model import demo_model_path
    from vllmchat.core.settings import LoadSettings

    extra = {"n_threads": args.threads} if args.threads else {}
    return LoadSettings(
        model_path=args.model or str(demo_model_path()),
        n_gpu_layers=args.n_gpu_layers,
        n_ctx=args.n_ctx,
        n_batch=args.n_batch,
        flash_attn=args.flash_attn,
        type_k=args.type_k,
        type_v=args.type_v,
        use_mmap=not args.no_mmap,
        **extra,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllmchat", description=__doc__)
    parser.add_argument("--version", action="version", version=f"vllmchat {__version__}")
    sub = parser.add_subparsers(dest="command")
    from vllmchat.cli import bench, chat, doctor, models

    chat.register(sub)
    models.register(sub)
    doctor.register(sub)
    bench.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``vllmchat chat``, ``models``, ``doctor``, ``bench``, ...)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if getattr(args, "func", None) is None:
        build_parser().print_help()
        return 2
    return int(args.func(args) or 0)
