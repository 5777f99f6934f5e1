"""``vllmchat tools``: the configured MCP servers, started, with their states and tools."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("tools", help="MCP tool servers: list them (started), import a config")
    tools_sub = p.add_subparsers(dest="tools_command")
    listing = tools_sub.add_parser("list", help="start the configured servers; print their tools")
    listing.add_argument("--config", type=Path, help="an mcp.json (default: vllmchat's own)")
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.add_argument(
        "--timeout", type=float, default=30.0, help="seconds each server has to start"
    )
    listing.set_defaults(func=run_list)
    importing = tools_sub.add_parser(
        "import", help="add the servers of an mcp.json or claude_desktop_config.json"
    )
    importing.add_argument("file", type=Path, nargs="?", help="default: the ones found here")
    importing.set_defaults(func=run_import)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def run_list(args: argparse.Namespace) -> int:
    from vllmchat.core.app.tools.service import try_servers
    from vllmchat.core.tools.config import ConfigError, config_path, load_config

    path = args.config or config_path()
    try:
        config = load_config(path, must_exist=args.config is not None)
    except ConfigError as exc:
        print(f"vllmchat tools: {exc}", file=sys.stderr)
        return 2
    statuses = try_servers(config, start_timeout_s=args.timeout)
    disabled = [s.name for s in config.servers if s.disabled]
    if args.json:
        report = {
            "config": str(path),
            "servers": [s.to_json() for s in statuses if s.server not in disabled]
            + [{"name": n, "state": "disabled", "tools": []} for n in disabled],
        }
        print(json.dumps(report, indent=2))
    else:
        if not config.servers:
            print(f"No MCP servers are configured in {path}.")
        for status in statuses:
            if status.server in disabled:
                print(f"{status.server}: disabled")
                continue
            tools = ", ".join(t.name for t in status.tools) or "no tools"
            line = f"{status.server}: {status.state}"
            print(f"{line} ({tools})" if status.state == "ready" else f"{line}: {status.message}")
            for problem in status.problems:
                print(f"  {problem}")
            if status.state == "failed" and status.stderr_tail:
                print("  " + status.stderr_tail.replace("\n", "\n  "))
    return 0 if all(s.state == "ready" for s in statuses if s.server not in disabled) else 1


def run_import(args: argparse.Namespace) -> int:
    from vllmchat.core.tools.config import ConfigError, config_path, import_config, known_configs

    sources = [args.file] if args.file else known_configs()
    if not sources:
        print("No MCP config of Claude Desktop, LM Studio or Cursor was found.", file=sys.stderr)
        return 1
    status = 0
    for source in sources:
        try:
            names, warnings = import_config(source)
        except ConfigError as exc:
            print(f"vllmchat tools import: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{source}: added {', '.join(names) or 'no servers'} to {config_path()}")
        for warning in warnings:
            print(f"  {warning}", file=sys.stderr)
    return status
