"""The *Tools* tab: the MCP servers' ``mcp.json``, edited, checked, imported, and tried.

Saving checks the text first: a syntax error is shown with its line and column (the
cursor is put there) and nothing is written. Secrets named in ``secretEnv`` /
``secretHeaders`` go to the keyring. *Start servers* starts each one off the GUI
thread and lists its state: ready with its tools, or failed with its stderr's tail.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.tools.config import (
    ConfigError,
    ToolsConfig,
    config_path,
    import_config,
    known_configs,
    parse_config,
    save_config,
)
from vllmchat.core.tools.events import ServerStatus
from vllmchat.ui.common.workers import WorkerGroup

TEMPLATE = '{\n  "mcpServers": {\n  }\n}\n'


def start_servers(config: ToolsConfig) -> list[ServerStatus]:
    """Start every server of ``config`` and stop them again (runs on a worker thread)."""
    from vllmchat.core.app.tools.service import try_servers

    return try_servers(config)


class ToolsTab(QWidget):
    """Edit ``mcp.json`` (``path``, default: vllmchat's own) and try its servers."""

    def __init__(self, path: Path | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path or config_path()
        self.workers = WorkerGroup(self)
        self.editor = QPlainTextEdit()
        self.editor.setAccessibleName("MCP servers (mcp.json)")
        self.save = QPushButton("Save")
        self.import_button = QPushButton("Import…")
        self.start = QPushButton("Start servers")
        self.servers = QListWidget()
        self.servers.setAccessibleName("MCP servers and their state")
        self.message = QLabel()
        self.message.setWordWrap(True)
        row = QHBoxLayout()
        for button in (self.save, self.import_button, self.start):
            row.addWidget(button)
        row.addStretch()
        layout = QVBoxLayout(self)
        layout.addWidget(self.editor, 2)
        layout.addLayout(row)
        layout.addWidget(self.servers, 1)
        layout.addWidget(self.message)
        self.save.clicked.connect(self.save_text)
        self.import_button.clicked.connect(self._pick_import)
        self.start.clicked.connect(self.start_servers)
        self.reload()

    def reload(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = TEMPLATE
        except OSError as exc:
            self.message.setText(f"{self.path} cannot be read: {exc}")
            return
        self.editor.setPlainText(text)

    def _check(self) -> ToolsConfig | None:
        try:
            return parse_config(self.editor.toPlainText(), self.path)
        except ConfigError as exc:
            self.message.setText(f"Not saved: {exc}")
            if exc.line:
                block = self.editor.document().findBlockByLineNumber(exc.line - 1)
                cursor = QTextCursor(block)
                cursor.movePosition(QTextCursor.MoveOperation.Right, n=max(0, exc.column - 1))
                self.editor.setTextCursor(cursor)
                self.editor.setFocus()
            return None

    def save_text(self) -> bool:
        """Check and write the editor's text; False (and why) when it is not valid."""
        config = self._check()
        if config is None:
            return False
        try:
            warnings = save_config(config, self.path)
        except (ConfigError, OSError) as exc:
            self.message.setText(f"Not saved: {exc}")
            return False
        self.reload()
        self.message.setText(" ".join([f"Saved {len(config.servers)} server(s).", *warnings]))
        return True

    def import_file(self, source: Path) -> None:
        try:
            names, warnings = import_config(source, self.path)
        except ConfigError as exc:
            self.message.setText(f"Not imported: {exc}")
            return
        self.reload()
        added = ", ".join(names) or "no servers"
        self.message.setText(" ".join([f"Imported {added} from {source}.", *warnings]))

    def _pick_import(self) -> None:
        found = known_configs()
        start = str(found[0]) if found else str(Path.home())
        name, _ = QFileDialog.getOpenFileName(self, "Import MCP servers", start, "JSON (*.json)")
        if name:
            self.import_file(Path(name))

    def start_servers(self) -> None:
        config = self._check()
        if config is None:
            return
        self.servers.clear()
        self.message.setText(f"Starting {len(config.servers)} server(s)…")
        self.start.setEnabled(False)
        self.workers.run(
            lambda: start_servers(config), self._started, self._failed, name="Starting MCP servers"
        )

    def _started(self, statuses: list[ServerStatus]) -> None:
        self.start.setEnabled(True)
        for status in statuses:
            if status.state == "ready":
                tools = ", ".join(t.name for t in status.tools) or "no tools"
                text = f"{status.server}: ready — {tools}"
            else:
                text = f"{status.server}: {status.state}" + (
                    f" — {status.message}" if status.message else ""
                )
            item = QListWidgetItem(text)
            details = "\n".join([*status.problems, status.stderr_tail]).strip()
            if details:
                item.setToolTip(details)
            self.servers.addItem(item)
        self.message.setText("Servers tried; hover one for its stderr or left-out tools.")

    def _failed(self, exc: Exception) -> None:
        self.start.setEnabled(True)
        self.message.setText(f"The servers could not be started: {exc}")
