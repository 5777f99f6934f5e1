"""MCP servers in the ``mcpServers`` JSON shape of Claude Desktop, LM Studio and Cursor.

A stdio server has ``command``, ``args``, ``env`` (and ``cwd``); a streamable HTTP
server has ``url`` and ``headers``. vllmchat adds ``secretEnv`` / ``secretHeaders``:
the names whose values live in the OS keyring (``secrets``), blank in the file.
Keys this module does not know are kept and written back. A file that does not
parse is reported with its line and column and never overwritten.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from vllmchat.core.paths import config_dir
from vllmchat.core.tools import secrets

Transport = Literal["stdio", "http", "sse"]
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_CALL_TIMEOUT_S = 60.0
_KNOWN_KEYS = frozenset(
    {"command", "args", "env", "cwd", "url", "serverUrl", "headers", "type", "transport"}
    | {"disabled", "timeout", "timeout_ms", "secretEnv", "secretHeaders"}
)
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


class ConfigError(ValueError):
    """A config that cannot be used; ``line``/``column`` where the JSON itself is broken."""

    def __init__(
        self, message: str, *, path: Path | None = None, line: int = 0, column: int = 0
    ) -> None:
        where = f"{path}" if path else "the MCP config"
        if line:
            where += f", line {line}, column {column}"
        super().__init__(f"{where}: {message}")
        self.message = message
        self.path = path
        self.line = line
        self.column = column


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: a command to start (stdio) or an endpoint (HTTP)."""

    name: str
    transport: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    secret_env: frozenset[str] = frozenset()
    secret_headers: frozenset[str] = frozenset()
    disabled: bool = False
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    extra: Mapping[str, Any] = field(default_factory=dict)

    def with_secrets(self) -> ServerConfig:
        """A copy whose secret env values and headers are read from the keyring."""

        def fill(values: Mapping[str, str], names: frozenset[str], kind: str) -> dict[str, str]:
            out = dict(values)
            for name in names:
                stored = secrets.read_secret(secrets.secret_key(self.name, kind, name))
                if stored is not None:
                    out[name] = stored
            return out

        return replace(
            self,
            env=fill(self.env, self.secret_env, "env"),
            headers=fill(self.headers, self.secret_headers, "header"),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``mcpServers`` entry; secret values blank (they live in the keyring)."""
        out: dict[str, Any] = dict(self.extra)
        if self.transport == "stdio":
            out["command"] = self.command
            if self.args:
                out["args"] = list(self.args)
            if self.env:
                out["env"] = {k: ("" if k in self.secret_env else v) for k, v in self.env.items()}
            if self.cwd:
                out["cwd"] = self.cwd
        else:
            out["url"] = self.url
            if self.transport == "sse":
                out["type"] = "sse"
            if self.headers:
                out["headers"] = {
                    k: ("" if k in self.secret_headers else v) for k, v in self.headers.items()
                }
        if self.secret_env:
            out["secretEnv"] = sorted(self.secret_env)
        if self.secret_headers:
            out["secretHeaders"] = sorted(self.secret_headers)
        if self.disabled:
            out["disabled"] = True
        if self.timeout_s != DEFAULT_CALL_TIMEOUT_S:
            out["timeout"] = self.timeout_s
        return out


@dataclass(frozen=True)
class ToolsConfig:
    """The configured servers, in file order."""

    servers: tuple[ServerConfig, ...] = ()

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"mcpServers": {s.name: s.to_json() for s in self.servers}}


def config_path() -> Path:
    """Where vllmchat keeps its MCP servers."""
    return config_dir() / "mcp.json"


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of strings")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ConfigError(f"{where}.{key} must be a string")
        out[str(key)] = str(item)
    return out


def _transport(name: str, entry: Mapping[str, Any]) -> Transport:
    kind = str(entry.get("type") or entry.get("transport") or "").lower().replace("_", "-")
    has_url = "url" in entry or "serverUrl" in entry
    if kind in ("", "stdio") and "command" in entry:
        return "stdio"
    if kind in ("http", "streamable-http", "streamablehttp") or (kind == "" and has_url):
        return "http"
    if kind == "sse":
        return "sse"
    if kind == "stdio":
        raise ConfigError(f"server {name!r} has no command")
    raise ConfigError(f"server {name!r} needs a command (stdio) or a url (HTTP)")


def _timeout(name: str, entry: Mapping[str, Any]) -> float:
    if "timeout_ms" in entry:
        raw, scale = entry["timeout_ms"], 1000.0
    elif "timeout" in entry:
        raw, scale = entry["timeout"], 1.0
    else:
        return DEFAULT_CALL_TIMEOUT_S
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw <= 0:
        raise ConfigError(f"server {name!r}: timeout must be a positive number")
    return float(raw) / scale


def server_from_json(name: str, entry: Any) -> ServerConfig:
    """One ``mcpServers`` entry, checked."""
    if not name.strip():
        raise ConfigError("a server has an empty name")
    if not isinstance(entry, dict):
        raise ConfigError(f"server {name!r} must be an object")
    transport = _transport(name, entry)
    where = f"mcpServers.{name}"
    command = entry.get("command", "")
    if transport == "stdio" and (not isinstance(command, str) or not command.strip()):
        raise ConfigError(f"{where}.command must be a non-empty string")
    url = entry.get("url", entry.get("serverUrl", ""))
    if not isinstance(url, str) or (
        transport != "stdio" and not url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"{where}.url must be an http(s) URL")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"{where}.cwd must be a string")
    return ServerConfig(
        name=name,
        transport=transport,
        command=command if transport == "stdio" else "",
        args=_strings(entry.get("args", []), f"{where}.args"),
        env=_string_map(entry.get("env", {}), f"{where}.env"),
        cwd=cwd or None,
        url=url if transport != "stdio" else "",
        headers=_string_map(entry.get("headers", {}), f"{where}.headers"),
        secret_env=frozenset(_strings(entry.get("secretEnv", []), f"{where}.secretEnv")),
        secret_headers=frozenset(
            _strings(entry.get("secretHeaders", []), f"{where}.secretHeaders")
        ),
        disabled=bool(entry.get("disabled", False)),
        timeout_s=_timeout(name, entry),
        extra={k: v for k, v in entry.items() if k not in _KNOWN_KEYS},
    )


def parse_config(text: str, path: Path | None = None) -> ToolsConfig:
    """A config from JSON text (``mcpServers``, or VS Code's ``servers``)."""
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(exc.msg, path=path, line=exc.lineno, column=exc.colno) from exc
    if not isinstance(data, dict):
        raise ConfigError("the top level must be an object with mcpServers", path=path)
    servers = data.get("mcpServers", data.get("servers", {}))
    if not isinstance(servers, dict):
        raise ConfigError("mcpServers must be an object of servers", path=path)
    try:
        return ToolsConfig(tuple(server_from_json(str(k), v) for k, v in servers.items()))
    except ConfigError as exc:
        raise ConfigError(exc.message, path=path) from exc


def load_config(path: Path | None = None, *, must_exist: bool = False) -> ToolsConfig:
    """The saved config; empty where there is none, unless the user named the file
    (``must_exist``). Raises ``ConfigError``."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        if must_exist:
            raise ConfigError("the file does not exist", path=path) from exc
        return ToolsConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot be read ({exc})", path=path) from exc
    return parse_config(text, path)


def save_config(config: ToolsConfig, path: Path | None = None) -> list[str]:
    """Write atomically; secrets go to the keyring. Returns warnings (no keyring).

    A file at ``path`` that does not parse is left as it is: ``ConfigError``.
    """
    path = path or config_path()
    if path.exists():
        load_config(path)  # refuses to replace a file the user is still fixing
    warnings: list[str] = []
    for server in config.servers:
        for kind, values, names in (
            ("env", server.env, server.secret_env),
            ("header", server.headers, server.secret_headers),
        ):
            for name in sorted(names):
                if values.get(name):
                    warning = secrets.store_secret(
                        secrets.secret_key(server.name, kind, name), values[name]
                    )
                    if warning and warning not in warnings:
                        warnings.append(warning)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mcp-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(config.to_json(), fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
    return warnings


def _mark_secrets(server: ServerConfig) -> ServerConfig:
    """Env values and headers whose names say they are secrets move to the keyring."""
    return replace(
        server,
        secret_env=server.secret_env
        | {k for k, v in server.env.items() if v and _SECRET_NAME.search(k)},
        secret_headers=server.secret_headers
        | {k for k, v in server.headers.items() if v and _SECRET_NAME.search(k)},
    )


def merge_import(current: ToolsConfig, imported: ToolsConfig) -> tuple[ToolsConfig, list[str]]:
    """``current`` plus the servers of another app's config; returns the names added.

    A name already taken gets ``-imported`` (then a number) so nothing is replaced.
    """
    taken = {s.name for s in current.servers}
    added: list[ServerConfig] = []
    for server in imported.servers:
        name, n = server.name, 1
        while name in taken:
            name = f"{server.name}-imported" + (f"-{n}" if n > 1 else "")
            n += 1
        taken.add(name)
        added.append(_mark_secrets(replace(server, name=name)))
    return ToolsConfig(current.servers + tuple(added)), [s.name for s in added]


def import_config(source: Path, target: Path | None = None) -> tuple[list[str], list[str]]:
    """Add the servers of ``source`` (an ``mcp.json`` or ``claude_desktop_config.json``)
    to vllmchat's config; returns (names added, warnings). Raises ``ConfigError``."""
    if not source.is_file():
        raise ConfigError("no such file", path=source)
    imported = load_config(source)
    merged, names = merge_import(load_config(target), imported)
    return names, save_config(merged, target)


def known_configs(home: Path | None = None) -> list[Path]:
    """Other apps' MCP configs that exist here (Claude Desktop, LM Studio, Cursor)."""
    home = home or Path.home()
    if sys.platform == "darwin":
        claude = home / "Library" / "Application Support" / "Claude"
    elif sys.platform == "win32":
        claude = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude"
    else:
        claude = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude"
    candidates: Sequence[Path] = (
        claude / "claude_desktop_config.json",
        home / ".lmstudio" / "mcp.json",
        home / ".cursor" / "mcp.json",
    )
    return [p for p in candidates if p.is_file()]
