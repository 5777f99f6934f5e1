"""The quant lab on real quants of one model, made with llama.cpp's quantizer through
the engine: KLD orders F16 < Q8_0 < Q4_K_M, F16 against itself is ~0, the CLI prints
it, and measured quality drives the quant advice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.local.client import EngineClient
from vllmchat.core.models.advisor import GPU_FULL, Fit, QuantAdvice, _recommend_measured
from vllmchat.core.models.memory_estimate import MemoryEstimate
from vllmchat.core.placement import Placement
from vllmchat.core.tuning import quant_lab
from vllmchat.core.tuning.events import QuantsCompared
from vllmchat.core.tuning.quant_lab import QualityCache, compare, reference_of


@pytest.fixture(scope="module")
def smol_quants(tmp_path_factory, demo_model) -> dict[str, Path]:
    """SmolLM2-135M-Instruct as F16 (dequantized from the demo's Q4_1), then Q8_0 and
    Q4_K_M quantized from that F16, plus a byte copy of the F16."""
    folder = tmp_path_factory.mktemp("smol-quants")
    client = EngineClient()
    try:
        f16 = folder / "Smol-135M-F16.gguf"
        client.quantize(str(demo_model), str(f16), "F16")
        out = {"F16": f16}
        for label in ("Q8_0", "Q4_K_M"):
            out[label] = folder / f"Smol-135M-{label}.gguf"
            client.quantize(str(f16), str(out[label]), label)
    finally:
        client.close()
    copy = folder / "copy" / "Smol-135M-F16.gguf"
    copy.parent.mkdir()
    shutil.copyfile(f16, copy)
    out["F16-copy"] = copy
    return out


def test_quantizing_through_the_engine_writes_smaller_files(smol_quants):
    sizes = {k: os.path.getsize(v) for k, v in smol_quants.items()}
    assert sizes["F16"] > sizes["Q8_0"] > sizes["Q4_K_M"]


def test_kld_orders_the_quants_and_f16_against_itself_is_zero(smol_quants, monkeypatch):
    # The text's first sixth: about 460 tokens, three chunks of 128 (the second half of
    # each, less its last token, is scored: 63 tokens a chunk).
    text = quant_lab.benchmark_text()
    monkeypatch.setattr(quant_lab, "benchmark_text", lambda: text[: len(text) // 6])
    files = [str(smol_quants[k]) for k in ("Q4_K_M", "F16-copy", "Q8_0", "F16")]
    assert reference_of(files) in (str(smol_quants["F16"]), str(smol_quants["F16-copy"]))
    client = EngineClient()
    try:
        events = list(compare(client, files, n_ctx=128, speed=False))
    finally:
        client.close()
    done = events[-1]
    assert isinstance(done, QuantsCompared)
    rows = {(r.label, r.reference): r for r in done.rows}
    ref = next(r for r in done.rows if r.reference)
    twin = next(r for r in done.rows if r.label == "F16" and not r.reference)
    q8, q4 = rows[("Q8_0", False)], rows[("Q4_K_M", False)]
    assert ref.kld_mean == 0.0 and twin.kld_mean < 1e-6 and twin.top1_agreement == 1.0
    assert twin.kld_mean < q8.kld_mean < q4.kld_mean
    assert q8.top1_agreement > q4.top1_agreement > 0.5
    assert ref.tokens_scored == 3 * 63 and ref.perplexity > 1.0
    assert all(r.tokens_scored == ref.tokens_scored for r in done.rows)
    assert abs(twin.perplexity - ref.perplexity) < 1e-6
    assert q4.perplexity > ref.perplexity
    assert QualityCache().kld_of(str(smol_quants["Q4_K_M"])) == pytest.approx(q4.kld_mean)


def test_the_cli_compares_with_speed_and_memory(small_quants):
    """On a small synthetic model's real quants: the CLI's rows, not the quality order
    (the test above), are what is checked here."""
    files = [str(small_quants["F16"]), str(small_quants["Q4_K_M"])]
    out = subprocess.run(
        [sys.executable, "-m", "vllmchat", "quants", "compare", *files, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["reference"] == files[0]
    q4 = next(r for r in data["rows"] if r["label"] == "Q4_K_M")
    assert q4["kld_mean"] > 0 and q4["decode_tok_s"] > 0 and q4["prefill_tok_s"] > 0
    assert q4["ram"] > 0


def test_a_file_that_is_not_a_model_is_a_row_with_its_reason(small_quants, tmp_path):
    bad = tmp_path / "Broken-Q8_0.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    client = EngineClient()
    try:
        done = list(compare(client, [str(small_quants["F16"]), str(bad)], speed=False))[-1]
    finally:
        client.close()
    broken = next(r for r in done.rows if r.path == str(bad))
    assert broken.error and not next(r for r in done.rows if r.reference).error


def test_measured_quality_picks_the_lowest_quant_that_holds():
    def row(label: str, kld: float | None) -> QuantAdvice:
        est = MemoryEstimate(0, 0, 0, 0, 0, 0, 0, 0, 0)
        return QuantAdvice(
            f"m-{label}.gguf", label, 1, Fit(GPU_FULL, Placement(n_gpu_layers=33), est, ""), kld=kld
        )

    rows = [row("F16", 0.0), row("Q8_0", 0.002), row("Q4_K_M", 0.03), row("Q3_K_M", 0.2)]
    assert rows[_recommend_measured(rows)].label == "Q4_K_M"
    assert _recommend_measured([row("Q4_K_M", None)]) is None


def test_quantizing_a_missing_file_is_a_clear_error(tmp_path):
    client = EngineClient()
    try:
        with pytest.raises(EngineError):
            client.quantize(str(tmp_path / "none.gguf"), str(tmp_path / "out.gguf"), "Q8_0")
        assert client.alive
    finally:
        client.close()
