"""The Server panel's two tables: the requests the API answered (newest first, the
last ``LOG_ROWS`` kept) and the clients' saved KV states."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from vllmchat.core.app.serving.service import RequestLogged
from vllmchat.core.engine.api_states import RAM, StatesChanged

LOG_ROWS = 200
LOG_COLUMNS = ("Time", "Client", "Request", "Status", "Cached / prompt", "Output", "Seconds")
STATE_COLUMNS = ("Client", "Tokens", "Size", "Kept in", "Last used")
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def size_text(n_bytes: int) -> str:
    """Bytes as MiB (KiB under one MiB)."""
    if n_bytes < 1 << 20:
        return f"{n_bytes / 1024:,.0f} KiB"
    return f"{n_bytes / (1 << 20):,.1f} MiB"


def clock_text(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _item(text: str, *, right: bool = False, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if right:
        item.setTextAlignment(_RIGHT)
    if tip:
        item.setToolTip(tip)
    return item


def _text(item: QTableWidgetItem | None) -> str:
    return item.text() if item is not None else ""


def _table(columns: tuple[str, ...], stretch: int) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    rows = table.verticalHeader()
    rows.hide()
    rows.setDefaultSectionSize(table.fontMetrics().height() + 6)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return table


class RequestLogTable:
    """The requests answered, newest first; older rows than ``LOG_ROWS`` go."""

    def __init__(self) -> None:
        self.table = _table(LOG_COLUMNS, LOG_COLUMNS.index("Request"))

    def add(self, r: RequestLogged) -> None:
        t = self.table
        t.insertRow(0)
        tokens = f"{r.cached_tokens:,} / {r.prompt_tokens:,}" if r.prompt_tokens else "–"
        output = f"{r.completion_tokens:,}" if r.completion_tokens else "–"
        cells = (
            _item(clock_text(r.at)),
            _item(r.client or "–"),
            _item(r.what, tip=r.note),
            _item(str(r.status), right=True, tip=r.note),
            _item(tokens, right=True),
            _item(output, right=True),
            _item(f"{r.seconds:.2f}", right=True),
        )
        for column, cell in enumerate(cells):
            t.setItem(0, column, cell)
        while t.rowCount() > LOG_ROWS:
            t.removeRow(t.rowCount() - 1)

    def rows(self) -> list[tuple[str, ...]]:
        """Each row's texts, top (newest) first."""
        t = self.table
        return [
            tuple(_text(t.item(row, c)) for c in range(t.columnCount()))
            for row in range(t.rowCount())
        ]


class ClientStatesTable:
    """The clients' saved states, most recently used first."""

    def __init__(self) -> None:
        self.table = _table(STATE_COLUMNS, STATE_COLUMNS.index("Client"))
        self.shown: StatesChanged | None = None

    def show_states(self, states: StatesChanged) -> None:
        self.shown = states
        t = self.table
        t.setRowCount(len(states.states))
        for row, s in enumerate(states.states):
            cells = (
                _item(s.key, tip="named by the client" if s.named else "named by the server"),
                _item(f"{s.tokens:,}", right=True, tip=f"{s.prompt_tokens:,} of the prompt"),
                _item(size_text(s.size), right=True),
                _item("RAM" if s.where == RAM else "disk"),
                _item(clock_text(s.used)),
            )
            for column, cell in enumerate(cells):
                t.setItem(row, column, cell)

    def summary(self) -> str:
        s = self.shown
        if s is None:
            return "no client yet"
        n = len(s.states)
        return (
            f"{n} client{'s' if n != 1 else ''} · RAM {size_text(s.ram_bytes)} · "
            f"disk {size_text(s.disk_bytes)}"
        )
