"""``vllmchat chat`` in a real terminal process, driven through stdin."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import terminal_chat


def test_terminal_chat_streams_and_reloads(demo_model, tmp_path):
    script = "Hello there\n/stats\n/ngl 1\nWhat next?\n/save {}\n/quit\n".format(tmp_path / "s.kv")
    proc = terminal_chat(
        script,
        "--n-ctx",
        "1024",
        "--max-tokens",
        "16",
        "--temperature",
        "0",
        "--stats",
        timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "llama · gguf template" in out  # the demo carries its ChatML template
    assert out.count("ai> ") == 2
    assert "reloaded in" in out and "KV cache kept" in out
    assert "saved" in out and (tmp_path / "s.kv").exists()
    # The second turn after the live reload prefilled only its new tokens.
    stats_lines = [line for line in out.splitlines() if "prefilled" in line]
    assert " 0 reused" in stats_lines[0]
    assert " 0 reused" not in stats_lines[-1]


def test_terminal_chat_reports_a_bad_model(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    proc = subprocess.run(
        [sys.executable, "-m", "vllmchat", "chat", "--model", str(bad)],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "not a GGUF model file" in proc.stderr


def test_terminal_chat_attaches_documents(demo_model, tmp_path):
    from vllmchat.bench.synthetic.pdf_writer import write_pdf

    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\nThe boat is called Marisol and sleeps four.\n")
    scan = write_pdf(tmp_path / "scan.pdf", ["", ""], scanned=True)
    script = (
        f"/attach {scan}\n/attach {tmp_path / 'missing.txt'}\nWhat is the boat called?\n/quit\n"
    )
    proc = terminal_chat(
        script,
        "--n-ctx",
        "1024",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--attach",
        str(notes),
        "--stats",
        timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "[attached notes.md:" in out and "goes whole into your next message" in out
    assert "scan.pdf has no text layer" in out and "vision" in out
    assert "There is no file" in out
    assert out.count("ai> ") == 1
    stats = [line for line in out.splitlines() if "prefilled" in line]
    assert stats, out
