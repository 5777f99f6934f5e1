"""The terminal's help as a new user reads it: plain words at the top, help for every
argument, the benchmarks listed; and a search without a network that ends in one
clear line."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

from vllmchat.cli import bench
from vllmchat.main import DESCRIPTION, _help


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllmchat", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_the_top_level_help_is_plain_text(capsys):
    assert _help() == 0
    shown = capsys.readouterr().out
    assert " ".join(DESCRIPTION.split()) in " ".join(shown.split())
    assert "``" not in shown
    for command in ("chat", "search", "files", "download", "bench"):
        assert f"    {command} " in shown


def _commands() -> dict[str, argparse.ArgumentParser]:
    from vllmchat.cli import build_parser

    parser = build_parser()
    chooser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(chooser.choices)


def test_every_argument_of_the_model_and_bench_commands_has_help():
    commands = _commands()
    for name in ("models", "drafts", "search", "files", "download", "fit", "bench"):
        bare = [
            action.dest
            for action in commands[name]._actions
            if not isinstance(action, argparse._HelpAction) and not action.help
        ]
        assert bare == [], f"vllmchat {name}: {bare} have no help"


def test_bench_help_lists_each_benchmark_with_a_line():
    shown = _run("bench", "--help")
    assert shown.returncode == 0, shown.stderr
    listed = shown.stdout.split("benchmarks:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in listed] == list(bench.BENCHMARKS)
    assert all(len(line.split()) > 3 for line in listed)
    assert "engine        the engine path against raw llama-cpp-python" in shown.stdout


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_search_without_the_hub_says_so_once_and_at_once():
    started = time.monotonic()
    hub = f"http://127.0.0.1:{_closed_port()}"
    out = _run("search", "qwen", env={"HF_ENDPOINT": hub, "HF_HUB_OFFLINE": "0"})
    assert time.monotonic() - started < 20, "no retries with waits between them"
    assert out.returncode == 2 and out.stdout == ""
    [said] = out.stderr.splitlines()  # one line: no retries printed before it
    assert said.startswith(f"error: Cannot reach the hub at {hub} (")
    assert said.endswith("): check the network connection, or set HF_ENDPOINT to a mirror.")


def test_the_terminal_chat_starts_without_the_mcp_and_openai_sdks():
    """Each SDK takes about a second to import: they load with the first tool server or
    remote engine, not with every start of the app."""
    code = (
        "import sys, vllmchat.cli.chat, vllmchat.core.app.chat_app\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'openai'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_the_tool_errors_connection_closed_code_is_the_sdks():
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    from vllmchat.core.tools import errors

    assert errors.CONNECTION_CLOSED == CONNECTION_CLOSED
