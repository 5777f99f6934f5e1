"""Two lists of the Tools dialog: the tools this conversation offers (checkboxes, a
server and its tools), and the tools always allowed (each revoked by a button).

Both only show what they are given and ask through signals: the window changes the
pick (an intent to the application layer) and the approvals, then shows them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.tools.events import ToolInfo

NAME = Qt.ItemDataRole.UserRole


class ToolPickList(QWidget):
    """Checkboxes: each server, and under it its tools; unchecked ones are not offered."""

    switched = Signal(list, bool)
    """(names, on): the user checked or unchecked a server or a tool (``server_tool``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel("Tools offered in this conversation (from its next turn):")
        self.note.setWordWrap(True)
        self.list = QListWidget()
        self.list.setAccessibleName("Tools offered in this conversation")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.list)
        self.list.itemChanged.connect(self._changed)

    def show_tools(
        self, servers: Sequence[str], tools: Sequence[ToolInfo], off: Iterable[str]
    ) -> None:
        """The servers and their tools (of those started), checked where offered."""
        off = set(off)
        with QSignalBlocker(self.list):
            self.list.clear()
            for server in servers:
                self._add(server, server, server not in off)
                for tool in (t for t in tools if t.server == server):
                    item = self._add(
                        f"    {tool.name}",
                        tool.model_name,
                        server not in off and tool.model_name not in off,
                    )
                    item.setToolTip(tool.description)
                    if server in off:
                        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
        if not servers:
            self.note.setText("No MCP servers are configured (Tools → MCP servers…).")

    def _add(self, text: str, name: str, on: bool) -> QListWidgetItem:
        item = QListWidgetItem(text, self.list)
        item.setData(NAME, name)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        return item

    def item_named(self, name: str) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(NAME) == name:
                return item
        return None

    def _changed(self, item: QListWidgetItem) -> None:
        self.switched.emit([item.data(NAME)], item.checkState() == Qt.CheckState.Checked)


class ApprovedList(QWidget):
    """The tools always allowed, each revoked by *Revoke* (its calls ask again)."""

    revoke_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setAccessibleName("Tools always allowed")
        self.revoke = QPushButton("Revoke")
        self.revoke.setToolTip("Ask before each call of this tool again")
        self.revoke.setEnabled(False)
        row = QHBoxLayout()
        row.addWidget(QLabel("Always allowed:"))
        row.addStretch(1)
        row.addWidget(self.revoke)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.list)
        self.list.currentItemChanged.connect(lambda *_: self._enable())
        self.revoke.clicked.connect(self._revoke)

    def set_names(self, names: Iterable[str]) -> None:
        self.list.clear()
        for name in sorted(names):
            self.list.addItem(name)
        if not self.list.count():
            self.list.addItem(QListWidgetItem("(none: each call asks)"))
            self.list.item(0).setFlags(Qt.ItemFlag.NoItemFlags)
        self._enable()

    def names(self) -> list[str]:
        items = (self.list.item(row) for row in range(self.list.count()))
        return [i.text() for i in items if i.flags() & Qt.ItemFlag.ItemIsEnabled]

    def _enable(self) -> None:
        item = self.list.currentItem()
        self.revoke.setEnabled(item is not None and bool(item.flags() & Qt.ItemFlag.ItemIsEnabled))

    def _revoke(self) -> None:
        item = self.list.currentItem()
        if item is not None and item.flags() & Qt.ItemFlag.ItemIsEnabled:
            self.revoke_requested.emit(item.text())
