"""The MCP config: the mcpServers shape, import, secrets in the keyring, broken files kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest

from tests.mcp_servers.memory_keyring import MemoryKeyring
from vllmchat.core.tools import secrets
from vllmchat.core.tools.config import (
    ConfigError,
    ServerConfig,
    ToolsConfig,
    import_config,
    load_config,
    parse_config,
    save_config,
)

CLAUDE = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"],
        },
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret", "LOG_LEVEL": "info"},
        },
        "remote": {
            "url": "https://example.com/mcp",
            "headers": {"Authorization": "Bearer abc", "X-Team": "blue"},
        },
    },
    "globalShortcut": "Ctrl+Space",
}


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    """The OS keyring replaced by one in memory (no keyring service runs here)."""
    before = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    secrets._SESSION.clear()
    yield ring
    keyring.set_keyring(before)
    secrets._SESSION.clear()


def test_the_claude_desktop_shape_parses() -> None:
    config = parse_config(json.dumps(CLAUDE))
    fs, gh, remote = config.servers
    assert (fs.transport, fs.command, fs.args[-1]) == ("stdio", "npx", "/home/me")
    assert gh.env["LOG_LEVEL"] == "info"
    assert (remote.transport, remote.url, remote.headers["X-Team"]) == (
        "http",
        "https://example.com/mcp",
        "blue",
    )


def test_a_syntax_error_names_line_and_column_and_the_file_is_not_overwritten(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp.json"
    broken = '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n'
    path.write_text(broken)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert (info.value.line, info.value.column) == (3, 26)
    assert "line 3, column 26" in str(info.value)
    with pytest.raises(ConfigError):
        save_config(ToolsConfig((ServerConfig("b", command="y"),)), path)
    assert path.read_text() == broken


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"args": ["x"]}, "needs a command"),
        ({"command": "x", "args": "not-a-list"}, "args must be a list"),
        ({"url": "ftp://x"}, "url must be an http"),
        ({"command": "x", "timeout": -1}, "timeout must be a positive"),
    ],
)
def test_bad_entries_are_named(entry: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_config(json.dumps({"mcpServers": {"s": entry}}))


def test_unknown_keys_survive_a_save(tmp_path: Path, memory_keyring: MemoryKeyring) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "autoApprove": ["t"]}}}))
    save_config(load_config(path), path)
    assert json.loads(path.read_text())["mcpServers"]["s"]["autoApprove"] == ["t"]


def test_import_moves_secrets_to_the_keyring(tmp_path: Path, memory_keyring: MemoryKeyring) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps(CLAUDE))
    target = tmp_path / "vllmchat" / "mcp.json"
    save_config(ToolsConfig((ServerConfig("github", command="old"),)), target)

    names, warnings = import_config(source, target)

    assert names == ["filesystem", "github-imported", "remote"]
    assert warnings == []
    text = target.read_text()
    assert "ghp_secret" not in text and "Bearer abc" not in text
    saved = load_config(target)
    assert saved.server("github") == ServerConfig("github", command="old")  # nothing replaced
    github = saved.server("github-imported")
    assert github is not None and github.env["GITHUB_PERSONAL_ACCESS_TOKEN"] == ""
    assert github.with_secrets().env == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret",
        "LOG_LEVEL": "info",
    }
    remote = saved.server("remote")
    assert remote is not None and remote.with_secrets().headers["Authorization"] == "Bearer abc"
    assert remote.headers["X-Team"] == "blue"


def test_without_a_keyring_secrets_last_the_session_and_we_say_so(tmp_path: Path) -> None:
    from keyring.backends.fail import Keyring as NoKeyring

    before = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())
    try:
        server = ServerConfig(
            "s", command="x", env={"API_KEY": "k"}, secret_env=frozenset({"API_KEY"})
        )
        warnings = save_config(ToolsConfig((server,)), tmp_path / "mcp.json")
        assert warnings == [secrets.NO_KEYRING]
        assert load_config(tmp_path / "mcp.json").servers[0].with_secrets().env["API_KEY"] == "k"
    finally:
        keyring.set_keyring(before)
        secrets._SESSION.clear()


def test_an_import_of_a_broken_file_changes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    source.write_text('{"mcpServers": {"a": {"command": "x"}')
    target = tmp_path / "mine.json"
    with pytest.raises(ConfigError, match="line 1"):
        import_config(source, target)
    assert not target.exists()
