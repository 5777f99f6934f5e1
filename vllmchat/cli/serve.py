"""``vllmchat serve``: the local API without the window (OpenAI's, Anthropic's and
Ollama's shapes) on the user's settings; each request is logged on one line."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any

HELP = """Serve the model to other apps (IDE agents, Open WebUI, scripts) over HTTP.

It listens on 127.0.0.1 only, unless --host names another address; then it needs an
API key (VLLMCHAT_API_KEY, or the one kept in the keyring by the window's Server
panel), which clients send as 'Authorization: Bearer KEY'. Each client's KV state
is kept (in RAM, then on disk), so a returning client's prompt is read from its
first new token. Stop with Ctrl+C."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the model over an OpenAI-compatible HTTP API",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        help="a GGUF file, or a model's name as GET /v1/models lists it "
        "(default: the model the app last loaded, else the demo)",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)"
    )
    p.add_argument("--port", type=int, default=None, help="the port (default: the settings', 1234)")
    p.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the API (repeat for more; default: none)",
    )
    p.add_argument(
        "--n-ctx", type=int, default=None, help="the context length (default: the settings')"
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=None,
        metavar="N",
        help="clients answered at once, batched, each in a sequence of n_ctx tokens "
        "(llama-server's -np; default: the settings', 4)",
    )
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> Any:
    from vllmchat.core.app.serving.models_on_offer import find_model, offered_models
    from vllmchat.core.app_settings import load_app_settings
    from vllmchat.core.demo_model import demo_model_path
    from vllmchat.core.settings import MAX_API_SLOTS

    settings = load_app_settings()
    if args.model:
        path = args.model
        if not os.path.isfile(path):
            found = find_model(offered_models(settings.model_folders), args.model)
            if found is None:
                raise ValueError(
                    f"There is no model {args.model!r}: give a .gguf file, or a "
                    "name `vllmchat models` lists."
                )
            path = found.path
        settings = settings.for_model(path)
    elif not settings.load.model_path or not os.path.isfile(settings.load.model_path):
        settings = settings.for_model(str(demo_model_path()))
    if args.n_ctx:
        settings = settings.with_changes(n_ctx=args.n_ctx)
    if args.parallel is not None:
        if not 1 <= args.parallel <= MAX_API_SLOTS:
            raise ValueError(f"--parallel must be from 1 to {MAX_API_SLOTS}, got {args.parallel}")
        settings = settings.with_changes(api_parallel=args.parallel)
    return settings


def run(args: argparse.Namespace) -> int:
    from vllmchat.core.app.events import Loaded, LoadFailed
    from vllmchat.core.app.serving.api_key import server_key
    from vllmchat.core.app.serving.service import ApiService
    from vllmchat.core.app.start import CannotStart, open_app
    from vllmchat.server.runner import ApiServer, ServerStartFailed

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    key = os.environ.get("VLLMCHAT_API_KEY") or server_key()
    started = open_app(settings)
    if isinstance(started, CannotStart):
        print(f"error: {started.message}", file=sys.stderr)
        return 2
    app = started.app
    service = ApiService(app)
    server = None
    try:
        print(
            f"loading {os.path.basename(settings.load.model_path)} ...", file=sys.stderr, flush=True
        )
        for event in app.load(settings, remember=False):
            if isinstance(event, LoadFailed):
                print(f"error: {event.message} {event.fix}".strip(), file=sys.stderr)
                return 1
            if isinstance(event, Loaded):
                print(f"loaded: {event.info.n_ctx} tokens of context", file=sys.stderr)
        port = args.port if args.port is not None else settings.api_port
        origins = tuple(args.cors or settings.api_cors_origins)
        try:
            server = ApiServer(service, args.host, port, key=key, origins=origins)
            address = server.start()
        except ServerStartFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        service.log.subscribe(_print_request)
        print(
            f"serving on {address.url}/v1 (OpenAI), {address.url}/api (Ollama); Ctrl+C stops",
            file=sys.stderr,
            flush=True,
        )
        _wait_for_signal(service)
        return 0
    finally:
        if server is not None:
            server.stop()
        service.close()
        started.close()


def _print_request(r: Any) -> None:
    cached = f" cached {r.cached_tokens}/{r.prompt_tokens}" if r.prompt_tokens else ""
    note = f" {r.note}" if r.note else ""
    stamp = time.strftime("%H:%M:%S", time.localtime(r.at))
    print(
        f"{stamp} {r.status} {r.what} {r.client}{cached} out {r.completion_tokens} "
        f"{r.seconds:.2f}s{note}",
        file=sys.stderr,
        flush=True,
    )


def _wait_for_signal(service: Any) -> None:
    done = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not done.wait(30):
        service.unload_if_idle()
