"""``vllmchat transcribe FILE``: an audio file's words, printed (Whisper on this machine)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "transcribe",
        help="print the words spoken in an audio file (speech to text on this machine)",
        description="Print the words spoken in an audio file (WAV, MP3, FLAC, OGG, M4A, ...). "
        "Silence and noise give no words; a long file shows its progress and stops at Ctrl+C "
        "with what was heard so far.",
    )
    p.add_argument("file", type=Path, metavar="FILE", help="the audio file")
    p.add_argument("--language", help="the language spoken, e.g. en, de, fr (default: detected)")
    p.add_argument(
        "--beam", type=int, default=1, help="beam size (1: greedy, fastest; 5: Whisper's own)"
    )
    p.add_argument("--segments", action="store_true", help="one line per segment, with times")
    p.add_argument(
        "--model",
        default="",
        metavar="NAME",
        help="the speech model, e.g. whisper-small (default: whisper-base; "
        "`vllmchat voice` lists and downloads them)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from vllmchat.core.voice.events import (
            TranscriptionDone,
            TranscriptionFailed,
            TranscriptionProgress,
            TranscriptSegment,
        )
        from vllmchat.core.voice.transcriber import Transcriber
    except ImportError as exc:
        print(
            f"vllmchat transcribe: {exc.name} is missing: pip install 'vllmchat[voice]'",
            file=sys.stderr,
        )
        return 1
    show_progress = sys.stderr.isatty()
    with Transcriber(model_name=args.model) as transcriber:
        # Ctrl+C stops at the next segment, and what was heard until then is printed.
        main_thread = threading.current_thread() is threading.main_thread()
        previous = (
            signal.signal(signal.SIGINT, lambda *_: transcriber.cancel()) if main_thread else None
        )
        heard: list[str] = []
        try:
            events = transcriber.transcribe_file(
                args.file, language=args.language, beam_size=args.beam
            )
            for event in events:
                if isinstance(event, TranscriptionProgress) and show_progress and event.total_s:
                    share = 100 * event.done_s / event.total_s
                    print(f"\r{share:5.1f}% of {event.total_s:.0f} s", end="", file=sys.stderr)
                elif isinstance(event, TranscriptSegment):
                    heard.append(event.text.strip())
                    if args.segments:
                        _end_progress(show_progress)
                        line = f"[{event.start_s:7.2f} → {event.end_s:7.2f}] {event.text}"
                        print(line, flush=True)
                elif isinstance(event, TranscriptionFailed):
                    _end_progress(show_progress)
                    if heard and not args.segments:  # what was heard before it failed
                        print(" ".join(heard))
                    print(f"vllmchat transcribe: {event.message}", file=sys.stderr)
                    return 1
                elif isinstance(event, TranscriptionDone):
                    _end_progress(show_progress)
                    if not args.segments and event.text:
                        print(event.text)
                    if event.cancelled:
                        print(
                            "vllmchat transcribe: stopped; what was heard until then is above",
                            file=sys.stderr,
                        )
                        return 130
                    return 0
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
    return 1


def _end_progress(shown: bool) -> None:
    if shown:
        print("\r\033[K", end="", file=sys.stderr)
