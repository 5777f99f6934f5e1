"""``vllmchat tune MODEL`` and ``vllmchat quants compare A.gguf B.gguf ...``."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import threading
from dataclasses import asdict
from typing import Any

from vllmchat.cli.options import add_options, build, given
from vllmchat.core.models.memory import MIB
from vllmchat.core.settings import GPU_MARGIN_MIB, LoadSettings


def register(sub: Any) -> None:
    p = sub.add_parser("tune", help="measure GPU layers and threads, and pick the fastest")
    p.add_argument("model", help="path of a .gguf")
    p.add_argument("--budget-s", type=float, default=60.0, help="time budget (default: 60)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--fresh", action="store_true", help="measure again even if cached")
    p.add_argument(
        "--gpu-margin-mib",
        type=int,
        help="device memory to keep free: this many MiB or 3%% of what the model may use, "
        "whichever is larger (default: the settings' gpu_margin_mib, "
        f"{GPU_MARGIN_MIB})",
    )
    group = p.add_argument_group("settings")
    names = add_options(group, LoadSettings, skip=("model_path", "n_gpu_layers"))
    p.set_defaults(func=cmd_tune, load_fields=names)
    q = sub.add_parser("quants", help="compare installed quants of one model")
    qs = q.add_subparsers(dest="quants_command", required=True)
    c = qs.add_parser("compare", help="memory, speed and quality (KLD, top-1, perplexity)")
    c.add_argument("files", nargs="+", help="GGUF files of the same model")
    c.add_argument("--n-ctx", type=int, default=512, help="chunk size scored (default: 512)")
    c.add_argument("--n-gpu-layers", type=int, default=0)
    c.add_argument("--no-speed", action="store_true", help="quality only")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=cmd_quants)


def _stop_on_signals(engine: Any) -> threading.Event:
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()
        engine.stop()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def cmd_tune(args: argparse.Namespace) -> int:
    from vllmchat.core.app.engines import work_engine
    from vllmchat.core.app.placement.tuning import run_tune
    from vllmchat.core.tuning.events import PointMeasured, TuneFinished

    if not os.path.exists(args.model):
        print(f"vllmchat tune: no such file: {args.model}")
        return 2
    if args.gpu_margin_mib is not None and args.gpu_margin_mib < 0:
        print(f"vllmchat tune: --gpu-margin-mib must be 0 or more, got {args.gpu_margin_mib}")
        return 2
    margin_mib = args.gpu_margin_mib
    if margin_mib is None:
        from vllmchat.core.app_settings import load_app_settings

        margin_mib = load_app_settings().gpu_margin_mib
    settings: LoadSettings = build(
        LoadSettings, {"model_path": args.model, **given(args, args.load_fields)}
    )
    engine = work_engine()
    stop = _stop_on_signals(engine)
    result = None
    try:
        for event in run_tune(
            engine,
            settings,
            args.budget_s,
            fresh=args.fresh,
            should_stop=stop.is_set,
            margin_mib=margin_mib,
        ):
            if isinstance(event, PointMeasured) and not args.json:
                p = event.point
                figures = (
                    f"prefill {p.prefill_tok_s:8.1f} tok/s  decode {p.decode_tok_s:7.1f} tok/s  "
                    f"RAM {p.ram / MIB:6.0f} MiB"
                    + (f"  VRAM {p.vram / MIB:6.0f} MiB" if p.vram is not None else "")
                    + (f"  free {p.free_after / MIB:6.0f} MiB" if p.free_after is not None else "")
                    + (" (under the margin)" if p.under_margin else "")
                    + (f"  [final round {p.final_round}]" if p.final_round else "")
                    if p.fits
                    else p.note
                )
                print(
                    f"[{event.done}/{event.planned} eta {event.eta_s:4.0f}s] "
                    f"{p.config.label():42} {figures}",
                    flush=True,
                )
            elif isinstance(event, TuneFinished):
                result = event.result
    finally:
        engine.close()
    if result is None:
        return 1
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        pick = result.pick.label() if result.pick else "none"
        print(f"pick: {pick} — {result.reason} ({result.seconds:.0f} s)")
    return 0 if result.pick is not None else 1


def cmd_quants(args: argparse.Namespace) -> int:
    from vllmchat.core.app.engines import work_engine
    from vllmchat.core.tuning.events import QuantProgress, QuantsCompared
    from vllmchat.core.tuning.quant_lab import compare

    missing = [f for f in args.files if not os.path.exists(f)]
    if missing:
        print(f"vllmchat quants: no such file: {', '.join(missing)}")
        return 2
    engine = work_engine()
    stop = _stop_on_signals(engine)
    done = None
    try:
        for event in compare(
            engine,
            args.files,
            n_ctx=args.n_ctx,
            n_gpu_layers=args.n_gpu_layers,
            speed=not args.no_speed,
            should_stop=stop.is_set,
        ):
            if isinstance(event, QuantProgress) and not args.json:
                print(f"[{event.done + 1}/{event.total}] {event.current}", flush=True)
            elif isinstance(event, QuantsCompared):
                done = event
    except ValueError as exc:
        print(f"vllmchat quants: {exc}")
        return 2
    finally:
        engine.close()
    if done is None:
        return 1
    if args.json:
        print(json.dumps({"reference": done.reference, "rows": [asdict(r) for r in done.rows]}))
        return 0
    print(
        f"{'quant':8} {'size':>9} {'KLD':>8} {'top-1':>6} {'PPL':>8} {'prefill':>8} {'decode':>7}"
    )
    for r in done.rows:
        if r.error:
            print(f"{r.label:8} {r.size / MIB:7.0f}M  {r.error}")
            continue
        kld = "ref" if r.reference else f"{r.kld_mean:.4f}"
        print(
            f"{r.label:8} {r.size / MIB:7.0f}M {kld:>8} {r.top1_agreement * 100:5.1f}% "
            f"{r.perplexity:8.3f} {r.prefill_tok_s:8.1f} {r.decode_tok_s:7.1f}"
        )
    return 0 if all(not math.isnan(r.perplexity) for r in done.rows) else 1
