"""The quant lab: installed quants of one model side by side — memory, prompt and
decode speed, and quality against the highest-precision one (KL divergence and
top-1 agreement of the next-token distributions, and perplexity, on a fixed
public-domain text). Results are cached per file and feed the quant advice.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path

from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.info import ScoreRequest, TextScore
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.engine.model_check import model_fingerprint
from vllmchat.core.models.advisor import QUANT_BITS, quant_label
from vllmchat.core.paths import measurements_dir
from vllmchat.core.placement import Placement
from vllmchat.core.resources import benchmark_text
from vllmchat.core.settings import LoadSettings, default_threads
from vllmchat.core.tuning.events import QuantEvent, QuantProgress, QuantsCompared
from vllmchat.core.tuning.results import QuantRow

Speed = dict[str, float | int | None]


def bits_of(path: str) -> float:
    """Bits per weight of a file's quant label (unknown labels sort as F16)."""
    return float(QUANT_BITS.get(quant_label(os.path.basename(path)), 16.0))


def reference_of(paths: Sequence[str]) -> str:
    """The highest-precision file (ties: the larger file)."""
    return max(paths, key=lambda p: (bits_of(p), os.path.getsize(p)))


def compare(
    engine: EngineClient,
    paths: Sequence[str],
    *,
    n_ctx: int = 512,
    n_gpu_layers: int = 0,
    n_threads: int | None = None,
    speed: bool = True,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[QuantEvent]:
    """Score every file against the highest-precision one; yields progress, then rows."""
    if len(paths) < 1:
        raise ValueError("no quants to compare")
    threads = n_threads or default_threads()
    ref = reference_of(paths)
    order = [ref] + [p for p in paths if p != ref]
    work = tempfile.mkdtemp(prefix="vllmchat-quants-")
    ref_logp = os.path.join(work, "reference.npy")
    rows: list[QuantRow] = []
    tokens: tuple[int, ...] = ()
    try:
        for i, path in enumerate(order):
            if should_stop():
                break
            yield QuantProgress(i, len(order), os.path.basename(path))
            row_speed: Speed = {}
            try:
                settings = LoadSettings(
                    model_path=path,
                    n_ctx=max(1024, n_ctx),
                    placement=Placement(n_gpu_layers=n_gpu_layers),
                    n_threads=threads,
                )
                engine.load(settings)
                if not tokens:
                    tokens = tuple(engine.tokenize(benchmark_text()))
                if speed:
                    sample = engine.measure(512, 64)
                    mem = engine.memory()
                    row_speed = {
                        "prefill_tok_s": sample.prefill_tok_s,
                        "decode_tok_s": sample.decode_tok_s,
                        "ram": mem.rss,
                        "vram": mem.vram,
                    }
                is_ref = path == ref
                score = engine.score(
                    ScoreRequest(
                        model_path=path,
                        tokens=tokens,
                        n_ctx=n_ctx,
                        n_gpu_layers=n_gpu_layers,
                        n_threads=threads,
                        save_reference=ref_logp if is_ref else "",
                        reference="" if is_ref else ref_logp,
                    )
                )
            except EngineError as exc:
                if should_stop():
                    break
                rows.append(_failed(path, path == ref, exc.message))
                if path == ref:
                    break  # nothing to compare against
                continue
            rows.append(_row(path, path == ref, score, row_speed))
    finally:
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    QualityCache().store(rows, ref)
    yield QuantsCompared(tuple(rows), ref)


def _row(
    path: str, is_ref: bool, score: TextScore, speed: dict[str, float | int | None]
) -> QuantRow:
    return QuantRow(
        path=path,
        label=quant_label(os.path.basename(path)) or "?",
        size=os.path.getsize(path),
        reference=is_ref,
        perplexity=score.perplexity,
        kld_mean=0.0 if is_ref else float(score.kld_mean or 0.0),
        kld_p99=0.0 if is_ref else float(score.kld_p99 or 0.0),
        top1_agreement=1.0 if is_ref else float(score.top1_agreement or 0.0),
        tokens_scored=score.tokens_scored,
        **speed,  # type: ignore[arg-type]
    )


def _failed(path: str, is_ref: bool, message: str) -> QuantRow:
    label = quant_label(os.path.basename(path)) or "?"
    size = os.path.getsize(path) if os.path.exists(path) else 0
    nan = float("nan")
    return QuantRow(path, label, size, is_ref, nan, nan, nan, nan, error=message)


class QualityCache:
    """Measured quality per quant file (keyed by the file's fingerprint)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or measurements_dir() / "quant-quality.json"

    def _read(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def store(self, rows: Sequence[QuantRow], reference: str) -> None:
        data = self._read()
        for row in rows:
            if row.error:
                continue
            try:
                key = model_fingerprint(row.path)
            except OSError:
                continue
            data[key] = {**asdict(row), "reference_file": os.path.basename(reference)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        except OSError:
            pass

    def kld_of(self, path: str) -> float | None:
        """The measured mean KLD of a file, or None when never measured."""
        try:
            entry = self._read().get(model_fingerprint(path))
        except OSError:
            return None
        value = entry.get("kld_mean") if entry else None
        return float(value) if isinstance(value, int | float) else None


def measured_quality(folders: Sequence[str | Path] = ()) -> dict[str, float]:
    """Measured mean KLD of installed quants, by file name (for the quant advice)."""
    from vllmchat.core.models.local import discover

    cache = QualityCache()
    out: dict[str, float] = {}
    for model in discover([Path(f) for f in folders]):
        kld = cache.kld_of(str(model.path))
        if kld is not None:
            out[os.path.basename(str(model.path))] = kld
    return out
