"""``vllmchat doctor``: what works here, what does not, and the one thing to do about each."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllmchat.core.doctor.findings import Finding


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="check this machine: backends, GPU offload, Qt, voice, audio, folders"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-load", action="store_true", help="do not load a model")
    p.add_argument("--model", help="check offload and chat with this GGUF (default: the demo)")
    p.add_argument("--mmproj", help="the model's projector (default: one beside the model)")
    p.add_argument("--no-audio", action="store_true", help="do not look for audio devices")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vllmchat.core.app.engines import work_engine
    from vllmchat.core.doctor import run_doctor

    report = run_doctor(
        work_engine,
        load_model=not args.no_load,
        model_path=args.model,
        mmproj_path=args.mmproj,
        device_checks=None if args.no_audio else _device_checks,
    )
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text())
    return 0 if report.chat_works else 1


def _device_checks() -> list[Finding]:
    """Qt Multimedia's view of the microphones and speakers (``vllmchat.audio``)."""
    from vllmchat.audio.checks import device_findings

    return device_findings()
