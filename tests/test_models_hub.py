"""Catalog, remote headers and downloads with the real huggingface_hub on a loopback mirror."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllmchat.core.models.catalog import CatalogError, list_quants, remote_header, search
from vllmchat.core.models.description import describe
from vllmchat.core.models.download import Downloader, DownloadError
from vllmchat.core.models.local import discover

REPO = "test-org/Small-GGUF"


@pytest.fixture
def small_repo(hub, small_quants, tmp_path):
    f16 = small_quants["F16"].read_bytes()
    half = len(f16) // 2
    (tmp_path / "a").write_bytes(f16[:half])
    (tmp_path / "b").write_bytes(f16[half:])
    hub.add(
        REPO,
        {
            "Small-Q8_0.gguf": small_quants["Q8_0"],
            "Small-Q4_K_M.gguf": small_quants["Q4_K_M"],
            "F16/Small-F16-00001-of-00002.gguf": tmp_path / "a",
            "F16/Small-F16-00002-of-00002.gguf": tmp_path / "b",
            "README.md": small_quants["Q8_0"],
        },
        downloads=50,
    )
    return hub


def test_list_quants_groups_splits_with_sizes_and_hashes(small_repo, small_quants):
    quants = list_quants(REPO)
    assert [q.label for q in quants] == ["Q4_K_M", "Q8_0", "F16"]
    q4, _, f16 = quants
    assert q4.size == small_quants["Q4_K_M"].stat().st_size
    assert q4.parts[0].sha256 == small_repo.sha256(small_quants["Q4_K_M"])
    assert f16.is_split and len(f16.parts) == 2
    assert f16.filename == "F16/Small-F16-00001-of-00002.gguf"
    assert f16.size == small_quants["F16"].stat().st_size


def test_search_finds_gguf_repositories(hub, small_quants):
    hub.add("a/Tiny-Llama-GGUF", {"x-Q4_0.gguf": small_quants["Q8_0"]}, downloads=5)
    hub.add("b/Tiny-Qwen-GGUF", {"x-Q4_0.gguf": small_quants["Q8_0"]}, downloads=9)
    hub.add("c/Other", {"x-Q4_0.gguf": small_quants["Q8_0"]})
    assert [h.repo for h in search("tiny")] == ["b/Tiny-Qwen-GGUF", "a/Tiny-Llama-GGUF"]


def test_remote_header_reads_only_the_header_of_the_demo_model(hub, gemma_model):
    hub.add("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": gemma_model})
    desc = describe(remote_header("google/gemma-3-270m-GGUF", "gemma-3-270m-Q4_K_M.gguf"))
    assert (desc.architecture, desc.n_layer, desc.n_swa) == ("gemma3", 18, 512)
    assert sum(desc.swa_layers) == 15 and desc.n_vocab == 262144
    ranges = hub.range_requests("gemma-3-270m-Q4_K_M.gguf")
    fetched = sum(int(r.split("-")[1]) - int(r.split("=")[1].split("-")[0]) + 1 for r in ranges)
    assert fetched <= 16 << 20 < gemma_model.stat().st_size


def test_full_download_is_verified_and_listed(small_repo, small_quants, tmp_path):
    q4 = list_quants(REPO)[0]
    seen = []
    path = Downloader(tmp_path).download(q4, on_progress=seen.append)
    assert path == tmp_path / REPO / "Small-Q4_K_M.gguf"
    assert path.read_bytes() == small_quants["Q4_K_M"].read_bytes()
    assert seen[-1].done == seen[-1].total == q4.size
    assert not list((tmp_path / ".partial").iterdir())


def test_split_set_downloads_as_a_set(small_repo, tmp_path):
    f16 = list_quants(REPO)[-1]
    path = Downloader(tmp_path).download(f16)
    assert path.name == "Small-F16-00001-of-00002.gguf"
    assert (path.parent / "Small-F16-00002-of-00002.gguf").exists()


def test_dropped_connection_resumes_instead_of_restarting(small_repo, small_quants, tmp_path):
    q8 = list_quants(REPO)[1]
    small_repo.faults.drop_after["Small-Q8_0.gguf"] = 300_000
    path = Downloader(tmp_path, backoff_s=0.01).download(q8)
    assert path.read_bytes() == small_quants["Q8_0"].read_bytes()
    ranges = small_repo.range_requests("Small-Q8_0.gguf")
    assert ranges[0] is None and ranges[1].startswith("bytes=") and ranges[1] != "bytes=0-"
    assert int(ranges[1][6:].split("-")[0]) >= 200_000


def test_server_errors_are_retried(small_repo, tmp_path):
    small_repo.faults.errors_5xx["Small-Q4_K_M.gguf"] = 2
    path = Downloader(tmp_path, backoff_s=0.01).download(list_quants(REPO)[0])
    assert path.exists() and len(small_repo.range_requests("Small-Q4_K_M.gguf")) == 3


def test_wrong_bytes_fail_the_hash_and_nothing_is_listed(small_repo, tmp_path, monkeypatch):
    small_repo.faults.corrupt.add("Small-Q4_K_M.gguf")
    with pytest.raises(DownloadError, match="SHA-256"):
        Downloader(tmp_path).download(list_quants(REPO)[0])
    assert not (tmp_path / REPO / "Small-Q4_K_M.gguf").exists()
    assert not any((tmp_path / ".partial").iterdir())
    monkeypatch.setenv("VLLMCHAT_MODELS_DIR", str(tmp_path))
    assert not [m for m in discover(include_demo=False) if "Small" in m.name]


def test_missing_and_gated_repositories_get_clear_messages(small_repo, monkeypatch):
    with pytest.raises(CatalogError, match="not found"):
        list_quants("nobody/nothing")
    small_repo.repos[REPO].gated = True
    with pytest.raises(CatalogError, match=r"gated.*HF_TOKEN"):
        list_quants(REPO)
    monkeypatch.setenv("HF_TOKEN", small_repo.token)
    assert list_quants(REPO, token=small_repo.token)


def test_not_enough_disk_is_refused_before_starting(hub, tmp_path):
    huge = tmp_path / "huge"
    with huge.open("wb") as fh:  # sparse: claims 8 TiB, uses no disk
        fh.truncate(8 << 40)
    hub.add("big/Huge-GGUF", {"Huge-Q8_0.gguf": huge})
    hub._sha[huge] = "0" * 64  # hashing 8 TiB of zeros is not the point here
    with pytest.raises(DownloadError, match="Not enough disk space"):
        Downloader(tmp_path / "models").download(list_quants("big/Huge-GGUF")[0])
    assert not hub.range_requests("Huge-Q8_0.gguf")


def test_killed_download_process_resumes_on_the_next_run(small_repo, small_quants, tmp_path):
    env = {**os.environ, "VLLMCHAT_MODELS_DIR": str(tmp_path)}
    small_repo.faults.bytes_per_s = 400_000
    cmd = [sys.executable, "-m", "vllmchat", "download", REPO, "Q8_0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    partial = tmp_path / ".partial" / "Small-Q8_0.gguf.part"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not partial.exists() or partial.stat().st_size < 2e5):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = partial.stat().st_size
    assert 0 < kept < small_quants["Q8_0"].stat().st_size
    small_repo.faults.bytes_per_s = None
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    target = tmp_path / REPO / "Small-Q8_0.gguf"
    assert target.read_bytes() == small_quants["Q8_0"].read_bytes()
    resumed_from = int(small_repo.range_requests("Small-Q8_0.gguf")[-1][6:].split("-")[0])
    assert resumed_from >= kept


def test_files_command_shows_quants_fit_and_a_recommendation(small_repo):
    out = subprocess.run(
        [sys.executable, "-m", "vllmchat", "files", REPO],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("★") for line in lines)
    assert "(2 parts)" in out.stdout and "RAM only" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "vllmchat", "files", "no/such"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "not found" in bad.stderr


def test_local_discovery_finds_app_and_hf_cache_models(tmp_path, monkeypatch, small_quants):
    app = tmp_path / "models" / "o" / "r"
    app.mkdir(parents=True)
    (app / "m-Q8_0.gguf").write_bytes(small_quants["Q8_0"].read_bytes())
    snap = tmp_path / "hf" / "models--o--r2" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "m-Q4_K_M.gguf").symlink_to(small_quants["Q4_K_M"])
    (snap / "x-00002-of-00002.gguf").write_bytes(b"GGUF")  # incomplete split: not listed
    monkeypatch.setenv("VLLMCHAT_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    found = {(m.label, m.source) for m in discover(include_demo=False)}
    assert found == {("Q8_0", "app"), ("Q4_K_M", "hf-cache")}


def test_remote_and_local_headers_agree(small_repo, small_quants):
    remote = describe(remote_header(REPO, "Small-Q4_K_M.gguf"))
    from vllmchat.core.gguf_header import read_header

    assert remote == describe(read_header(Path(small_quants["Q4_K_M"])))
