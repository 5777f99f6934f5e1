"""``vllmchat models | search | files | download | fit``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from vllmchat.cli.options import add_options, build, given
from vllmchat.core.models.memory import MIB, FitSettings
from vllmchat.core.placement import all_layers


def register(sub: Any) -> None:
    p = sub.add_parser("models", help="models on this machine, with their fit")
    p.add_argument("--folder", action="append", default=[], help="also look in this folder")
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("drafts", help="draft models for a model: same vocabulary, smaller")
    p.add_argument("model", help="path of a .gguf")
    p.add_argument("--folder", action="append", default=[], help="also look in this folder")
    p.add_argument("--hub", action="store_true", help="also search the hub (headers only)")
    p.set_defaults(func=cmd_drafts)
    p = sub.add_parser("search", help="search the hub for GGUF repositories")
    p.add_argument("text", help="words in the repository's name, e.g. qwen2.5 7b")
    p.add_argument(
        "--limit", type=int, default=20, help="show at most this many, most downloaded first"
    )
    p.set_defaults(func=cmd_search)
    p = sub.add_parser("files", help="a repository's quants, sizes and fit")
    p.add_argument("repo", help="the hub repository, e.g. Qwen/Qwen2.5-7B-Instruct-GGUF")
    _fit_options(p)
    p.set_defaults(func=cmd_files)
    p = sub.add_parser("download", help="download a quant (resumes, verifies SHA-256)")
    p.add_argument("repo", help="the hub repository, e.g. Qwen/Qwen2.5-7B-Instruct-GGUF")
    p.add_argument("quant", nargs="?", help="e.g. Q4_K_M (default: the recommended one)")
    p.set_defaults(func=cmd_download)
    p = sub.add_parser("voice", help="the voice's models: list them, or download those named")
    p.add_argument("names", nargs="*", help="e.g. whisper-base en_US-lessac-medium")
    p.set_defaults(func=cmd_voice)
    p = sub.add_parser("fit", help="memory needed by a model at given settings")
    p.add_argument("model", help="path of a .gguf")
    _fit_options(p, "--n-gpu-layers and --n-cpu-moe not given: the best placement that fits")
    p.add_argument("--mmproj", metavar="PATH", help="the model's projector (mmproj) for images")
    p.set_defaults(func=cmd_fit)


def _fit_options(p: argparse.ArgumentParser, gpu_layers_note: str = "") -> None:
    """The memory-relevant load settings, generated from ``FitSettings``."""
    group = p.add_argument_group("settings", gpu_layers_note or None)
    skip = (
        "gpu",
        "gpu_overhead",
        "gpu_free",
        "draft_vram",
        "draft_ram",
        "projector_bytes",
        "image_tokens",
    )
    p.set_defaults(fit_fields=add_options(group, FitSettings, skip=skip))  # type: ignore[arg-type]


def _settings(args: argparse.Namespace) -> FitSettings:
    made: FitSettings = build(FitSettings, given(args, args.fit_fields))
    return made


def _mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB" if n < 10 * 1024 * MIB else f"{n / 2**30:,.1f} GiB"


def _token() -> str | None:
    return os.environ.get("HF_TOKEN") or None


def cmd_models(args: argparse.Namespace) -> int:
    from vllmchat.core.gguf_header import read_header
    from vllmchat.core.models.advisor import best_fit
    from vllmchat.core.models.description import describe
    from vllmchat.core.models.hardware_probe import probe
    from vllmchat.core.models.local import discover
    from vllmchat.core.models.memory import projector_need

    hw = probe()
    models = discover(args.folder)
    if not models:
        print("No models found. `vllmchat download REPO` fetches one.")
    for m in models:
        try:
            with_images = FitSettings().with_projector(projector_need(m.projector))
            fit = best_fit(describe(read_header(m.path)), hw, with_images).message
        except Exception as exc:
            fit = f"unreadable: {exc}"
        sees = f"\n          vision: --mmproj-path {m.projector}" if m.vision else ""
        head = f"{m.label or '?':8} {_mib(m.size):>10}  {m.source:8} {m.path}"
        print(f"{head}\n          {fit}{sees}")
    return 0


def cmd_drafts(args: argparse.Namespace) -> int:
    from vllmchat.core.models.catalog import CatalogError
    from vllmchat.core.models.drafts import hub_drafts, installed_drafts
    from vllmchat.core.models.local import discover

    try:
        found = installed_drafts(args.model, discover(args.folder))
    except (OSError, ValueError) as exc:
        print(f"Cannot read {args.model}: {exc}", file=sys.stderr)
        return 2
    if args.hub:
        try:
            found += hub_drafts(args.model, token=_token())
        except CatalogError as exc:
            print(f"The hub could not be searched: {exc}", file=sys.stderr)
    if not found:
        print(
            "No model here has this model's vocabulary and is smaller."
            + ("" if args.hub else " `--hub` looks on the hub too.")
        )
    for c in found:
        use = f"--draft-model {c.path}" if c.path else f"vllmchat download {c.repo}"
        print(f"{_mib(c.size):>10}  {c.source:9} {c.name}\n            {use}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from vllmchat.core.models.catalog import CatalogError, search

    try:
        hits = search(args.text, limit=args.limit, token=_token())
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for hit in hits:
        print(f"{hit.repo:60} {hit.downloads:>10,} downloads")
    return 0


def quant_advice(repo: str, settings: FitSettings) -> list[Any]:
    """Quants of ``repo`` with their fit on this machine."""
    from vllmchat.core.models.hardware_probe import probe
    from vllmchat.core.models.repo_advice import repo_quant_advice
    from vllmchat.core.tuning.quant_lab import measured_quality

    return repo_quant_advice(repo, settings, probe(), token=_token(), quality=measured_quality())


def cmd_files(args: argparse.Namespace) -> int:
    from vllmchat.core.models.catalog import CatalogError

    try:
        rows = quant_advice(args.repo, _settings(args))
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"{args.repo} has no GGUF files.")
    for quant, advice in rows:
        mark = "★" if advice.recommended else " "
        parts = f" ({len(quant.parts)} parts)" if quant.is_split else ""
        print(
            f"{mark} {quant.label or '?':8} {_mib(quant.size):>10}  {quant.filename}{parts}"
            f"\n             {advice.fit.message}"
        )
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    from vllmchat.core.models.catalog import CatalogError
    from vllmchat.core.models.download import DownloadCancelled, Downloader, DownloadError
    from vllmchat.core.paths import models_dir

    try:
        rows = quant_advice(args.repo, FitSettings())
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wanted = args.quant.upper() if args.quant else None
    chosen = [q for q, a in rows if (q.label == wanted if wanted else a.recommended)]
    if not chosen:
        labels = ", ".join(q.label for q, _ in rows) or "none"
        print(f"error: no quant {wanted or 'fits'} in {args.repo} (has: {labels})", file=sys.stderr)
        return 2
    cancel = threading.Event()

    def show(p: Any) -> None:
        eta = f"{p.eta_s:,.0f}s" if p.eta_s != float("inf") else "?"
        sys.stderr.write(
            f"\r{p.fraction * 100:5.1f}%  {_mib(p.done)} / {_mib(p.total)}  "
            f"{p.bytes_per_s / MIB:6.1f} MiB/s  ETA {eta}   "
        )

    try:
        path = Downloader(models_dir(), token=_token()).download(
            chosen[0], on_progress=show, cancel=cancel
        )
    except KeyboardInterrupt:
        print("\ncancelled; run the same command again to resume", file=sys.stderr)
        return 130
    except (DownloadError, DownloadCancelled) as exc:
        logging.getLogger(__name__).error("The download failed: %s", exc, exc_info=exc)
        print(f"\nerror: {exc}", file=sys.stderr)
        return 2
    print(f"\n{path}")
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from vllmchat.core.engine.events import EngineError
    from vllmchat.core.engine.model_check import check_model_file
    from vllmchat.core.models.advisor import best_fit, check_fit, max_context, max_gpu_layers
    from vllmchat.core.models.description import describe
    from vllmchat.core.models.hardware_probe import probe
    from vllmchat.core.models.projector import read_projector

    try:
        desc = describe(check_model_file(args.model))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    hw = probe()
    s = _settings(args)
    if args.mmproj:
        try:
            projector = read_projector(args.mmproj)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if mismatch := projector.fits(desc.n_embd):
            print(f"error: {mismatch}", file=sys.stderr)
            return 2
        s = s.with_projector(projector)
    given_place = args.n_gpu_layers is not None or args.n_cpu_moe is not None
    fit = check_fit(desc, hw, s) if given_place else best_fit(desc, hw, s)
    e = fit.estimate
    print(
        f"{desc.name or args.model}: {desc.architecture}, {desc.n_layer} layers, "
        f"{desc.main_quant}, trained context {desc.n_ctx_train:,}"
    )
    print(
        f"machine: RAM {_mib(hw.ram_available)} free of {_mib(hw.ram_total)}; "
        + (
            ", ".join(f"{g.name} {_mib(g.free)} free of {_mib(g.total)}" for g in hw.gpus)
            or "no GPU"
        )
        + ("" if hw.gpu_offload else f" ({hw.offload_reason})")
    )
    print(f"weights  GPU {_mib(e.weights_gpu):>10}  CPU {_mib(e.weights_cpu):>10}")
    print(f"KV cache GPU {_mib(e.kv_gpu):>10}  CPU {_mib(e.kv_cpu):>10}  ({e.kv_cells} cells)")
    print(f"compute  GPU {_mib(e.compute_gpu):>10}  CPU {_mib(e.compute_cpu):>10}")
    if e.image_tokens:
        print(
            f"projector GPU {_mib(e.projector_gpu):>9}  CPU {_mib(e.projector_cpu):>10}  "
            f"({e.image_tokens} context tokens an image)"
        )
    print(
        f"total   VRAM {_mib(e.vram):>10}  RAM {_mib(e.ram):>10}  (GPU runtime "
        f"{_mib(e.overhead_gpu)})"
    )
    if len(e.vram_by_device) > 1:
        print("per GPU " + "  ".join(f"{i}: {_mib(b)}" for i, b in enumerate(e.vram_by_device)))
    if desc.is_moe:
        print(
            f"mixture of experts: {desc.n_expert} experts, {desc.n_expert_used} used per token; "
            f"experts {_mib(sum(desc.expert_bytes))} of {_mib(desc.weights_bytes)}"
        )
    elif desc.moe_unplaceable_reason:
        print(desc.moe_unplaceable_reason)
    print(fit.message)
    placed = fit.placement
    if placed.n_cpu_moe or placed.tensor_split:
        flags = f"--n-gpu-layers {placed.n_gpu_layers}"
        flags += f" --n-cpu-moe {placed.n_cpu_moe}" if placed.n_cpu_moe else ""
        flags += f" --tensor-split {placed.tensor_split}" if placed.tensor_split else ""
        print(f"load it with: {flags}")
    print(
        f"most GPU layers that fit: {max_gpu_layers(desc, hw, s)} of {all_layers(desc.n_layer)}; "
        f"largest context that fits: {max_context(desc, hw, s):,}"
    )
    return 0 if fit.fits else 1


def cmd_voice(args: argparse.Namespace) -> int:
    """Speech models on offer, or downloaded with progress (resumed after a stop)."""
    from vllmchat.core.app.voice.downloads import main

    return main(list(args.names))
