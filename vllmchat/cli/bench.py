"""``vllmchat bench NAME``: benchmarks that print JSON ratios measured in one run."""

from __future__ import annotations

import argparse
import json
from typing import Any

# Each benchmark, with what it measures in one line (``vllmchat bench --help`` lists them).
BENCHMARKS = {
    "engine": "the engine path against raw llama-cpp-python",
    "estimate": "the memory estimate against what llama.cpp allocates",
    "conversation": "a 200-turn soak, and reopening with a saved KV state",
    "ui": "the window: GUI-thread stalls while streaming and reloading; startup time",
    "tune": "the tuner's pick against an exhaustive sweep of the same placements",
    "tune-noise": "the tuner's pick under noisy speed readings (a simulated card)",
    "remote": "the app on llama.cpp's own server, on loopback",
    "moe": "expert placement for a mixture-of-experts model",
    "summary": "whether planted facts survive summaries, and whether a turn waits for one",
    "speculative": "decode speed with speculative decoding against without",
    "store": "opening a 200 MB conversation store against a 1 MB one",
    "vision": "images kept in the KV cache: what a follow-up and a restart encode",
    "attach": "a document prefilled once; a large one answered from passages",
    "tools": "a tool round trip through the demo model and a loopback MCP server",
    "serve": "the local API against llama-server: clients taking turns, restarts, load",
    "slots": "the API slot loop's steps against a bare llama.cpp loop (no HTTP)",
    "voice": "speech to text and text to speech: real-time factors, word error rate, silence",
}


def register(sub: Any) -> None:
    width = max(map(len, BENCHMARKS))
    listed = "\n".join(f"  {name:{width}}  {line}" for name, line in BENCHMARKS.items())
    p = sub.add_parser(
        "bench",
        help="benchmarks (prints JSON)",
        description="Run one benchmark; it prints the ratios it measured in one run.",
        epilog=f"benchmarks:\n{listed}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "name", choices=list(BENCHMARKS), metavar="NAME", help="the benchmark (listed below)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--model", help="GGUF to use (default: the demo model)")
    p.add_argument(
        "--mmproj", help="vision: the model's projector (default: a synthetic one for the demo)"
    )
    p.add_argument(
        "--real-projector",
        action="store_true",
        help="vision: a synthetic projector of Gemma 3's real vision tower (SigLIP, F16)",
    )
    p.add_argument(
        "--buffers",
        action="store_true",
        help="vision: only the projector's buffers at load against the estimate (no image)",
    )
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument(
        "--embedding-model",
        help="attach: an embedding GGUF for hybrid retrieval (default: the chat model's "
        "GGUF in embedding mode)",
    )
    p.add_argument("--server", help="summary: a server that writes the summaries")
    p.add_argument(
        "--n-ctx",
        type=int,
        help="tune: context size (default: 4096); moe: 8192 on a GPU, else 2048; serve: 8192",
    )
    p.add_argument(
        "--n-gpu-layers", type=int, default=0, help="speculative, serve, slots: layers on the GPU"
    )
    p.add_argument("--threads", type=int, default=2, help="speculative, serve, voice: CPU threads")
    p.add_argument(
        "--recogniser",
        default="",
        metavar="NAME",
        help="voice: the speech model, e.g. whisper-small (default: whisper-base)",
    )
    p.add_argument(
        "--parallel",
        action="store_true",
        help="serve: 1, 4 and 8 clients at once (API slots) against llama-server -np 8",
    )
    p.add_argument(
        "--alternating-only",
        action="store_true",
        help="serve: only the three clients taking turns (ours and llama-server's)",
    )
    p.add_argument("--budget-s", type=float, default=60.0, help="tune: the tuner's budget")
    p.add_argument(
        "--flash-attn", action="store_true", help="tune, moe, speculative, serve: flash attention"
    )
    p.add_argument(
        "--fit-args", help="moe: what llama-fit-params printed (its choice is measured too)"
    )
    p.add_argument(
        "--free-gib",
        type=float,
        help="moe: another process holds all but this many GiB of each GPU during the run",
    )
    p.add_argument(
        "--shape",
        help="moe: a synthetic Q4_K_M model of one of bench/synthetic/synth_moe.py's shapes, e.g. "
        "gpt-oss-20b or qwen3-30b-a3b (written once into the cache folder, then reused)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="moe on a GPU: also the buffers at four placements, a live reload and the "
        "best whole-layer placement",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.name == "ui":  # the window front end runs it (vllmchat.main routes it there)
        print("`vllmchat bench ui` is run by the window front end: call it as `vllmchat bench ui`.")
        return 2
    if args.name == "conversation":
        from vllmchat.bench.conversations import conversation_bench

        result = conversation_bench.run(model=args.model, quick=args.quick)
    elif args.name == "speculative":
        from vllmchat.bench.engine import speculative_bench

        result = speculative_bench.run(
            model=args.model,
            quick=args.quick,
            n_gpu_layers=args.n_gpu_layers,
            n_threads=args.threads,
            flash_attn=args.flash_attn,
        )
    elif args.name == "summary":
        from vllmchat.bench.conversations import summary_bench

        result = summary_bench.run(model=args.model, server=args.server, quick=args.quick)
    elif args.name == "remote":
        from vllmchat.bench.engine import remote_bench

        result = remote_bench.run(model=args.model, quick=args.quick)
    elif args.name == "tune":
        from vllmchat.bench.placement import tune_bench

        result = tune_bench.run(
            model=args.model,
            n_ctx=args.n_ctx or 4096,
            budget_s=args.budget_s,
            flash_attn=args.flash_attn,
            quick=args.quick,
        )
    elif args.name == "moe":
        from vllmchat.bench.placement import moe_bench
        from vllmchat.bench.synthetic import synth_moe

        if args.free_gib is not None and args.free_gib <= 0:
            print(f"vllmchat bench moe: --free-gib must be above 0, got {args.free_gib}")
            return 2
        if args.model and args.shape:
            print("vllmchat bench moe: give --model or --shape, not both")
            return 2
        if args.shape and args.shape not in synth_moe.MOE_SHAPES:
            names = ", ".join(synth_moe.MOE_SHAPES)
            print(f"vllmchat bench moe: no shape {args.shape!r}; the shapes: {names}")
            return 2
        from vllmchat.bench.placement.gpu_hold import HoldError

        try:
            result = moe_bench.run(
                model=args.model,
                n_ctx=args.n_ctx,
                budget_s=args.budget_s,
                flash_attn=args.flash_attn,
                quick=args.quick,
                fit_args=args.fit_args,
                free_gib=args.free_gib,
                shape=args.shape,
                full=args.full,
            )
        except HoldError as exc:
            print(f"vllmchat bench moe: {exc}")
            return 2
    elif args.name == "attach":
        from vllmchat.bench.conversations import attach_bench

        result = attach_bench.run(
            model=args.model, quick=args.quick, embedding_model=args.embedding_model
        )
    elif args.name == "store":
        from vllmchat.bench.conversations import store_bench

        result = store_bench.run(quick=args.quick)
    elif args.name == "vision":
        from vllmchat.bench.engine import vision_bench

        run = vision_bench.run_projector_buffers if args.buffers else vision_bench.run_vision_bench
        result = run(
            args.model, args.mmproj, n_threads=args.threads, real_shape=args.real_projector
        )
    elif args.name == "tools":
        from vllmchat.bench.tools import tools_bench

        result = tools_bench.run(model=args.model, quick=args.quick)
    elif args.name == "serve":
        from vllmchat.bench.serving import parallel_bench, serve_bench

        if args.parallel:
            result = parallel_bench.run(
                model=args.model,
                n_ctx=args.n_ctx or 2048,
                threads=args.threads,
                max_tokens=16 if args.quick else 64,
                n_gpu_layers=args.n_gpu_layers,
                flash_attn=args.flash_attn,
            )
        else:
            result = serve_bench.run(
                model=args.model,
                quick=args.quick,
                n_ctx=args.n_ctx or 8192,
                threads=args.threads,
                n_gpu_layers=args.n_gpu_layers,
                flash_attn=args.flash_attn,
                alternating_only=args.alternating_only,
            )
    elif args.name == "slots":
        from vllmchat.bench.engine import slot_steps

        result = slot_steps.run(
            model=args.model,
            n_gpu_layers=args.n_gpu_layers,
            threads=args.threads,
            flash_attn=args.flash_attn,
        )
    elif args.name == "voice":
        from vllmchat.bench.voice import voice_bench

        result = voice_bench.run(quick=args.quick, threads=args.threads, recogniser=args.recogniser)
    elif args.name == "tune-noise":
        from vllmchat.bench.placement import tune_noise

        result = tune_noise.run(seeds=10 if args.quick else tune_noise.SEEDS)
    elif args.name == "estimate":
        from vllmchat.bench.placement import estimate_bench

        result = estimate_bench.run(quick=args.quick)
    else:
        from vllmchat.bench.engine import engine_bench

        result = engine_bench.run(model=args.model, quick=args.quick)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:32} {value}")
    return 0
