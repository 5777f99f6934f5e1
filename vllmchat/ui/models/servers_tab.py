"""The model picker's *Servers* tab: an OpenAI-compatible server's URL and API key,
a connection test that lists its models, and the choice of one."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vllmchat.core.engine.remote.servers import api_key, store_api_key, url_warning
from vllmchat.ui.common.workers import WorkerGroup


def list_server_models(url: str, key: str | None) -> list[str]:
    """Connect and list (runs on a worker thread)."""
    from vllmchat.core.app.engines import open_server

    engine = open_server(url, key=key, timeout_s=10.0)
    try:
        return engine.models()
    finally:
        engine.close()


class ServersTab(QWidget):
    """Emits ``server_chosen(url, model)``; the key goes to the OS keyring."""

    server_chosen = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workers = WorkerGroup(self)
        self._notes: list[str] = []  # warnings shown with the result of the last test
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8080  (llama.cpp, vLLM, Ollama, LM Studio)")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional; kept in the system keyring")
        self.test = QPushButton("Test and list models")
        self.models = QListWidget()
        self.models.setAccessibleName("Models on the server")
        self.use = QPushButton("Chat with this model")
        self.use.setEnabled(False)
        self.message = QLabel(
            "Chat through a server when a model outgrows this machine: conversations, "
            "summaries and search stay here; the server owns the model and its memory."
        )
        self.message.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("API key", self.key)
        row = QHBoxLayout()
        row.addWidget(self.test)
        row.addStretch()
        row.addWidget(self.use)
        v = QVBoxLayout(self)
        v.addLayout(form)
        v.addLayout(row)
        v.addWidget(self.models, 1)
        v.addWidget(self.message)
        self.test.clicked.connect(self.test_server)
        self.url.returnPressed.connect(self.test_server)
        self.models.itemDoubleClicked.connect(lambda _item: self._choose())
        self.models.currentRowChanged.connect(lambda row: self.use.setEnabled(row >= 0))
        self.use.clicked.connect(self._choose)

    def test_server(self) -> None:
        url = self.url.text().strip()
        if not url:
            self.message.setText("Enter the server's URL first.")
            return
        key = self.key.text().strip() or api_key(url)
        notes = [w for w in (url_warning(url),) if w]
        if self.key.text().strip():
            stored = store_api_key(url, self.key.text().strip())
            if stored:
                notes.append(stored)
        self.models.clear()
        self.message.setText("Connecting…")
        self._notes = notes
        self.workers.run(
            lambda: list_server_models(url, key),
            self._listed,
            self._failed,
            name=f"Listing the models of {url}",
        )

    def _listed(self, names: list[str]) -> None:
        self.models.addItems(names)
        if names:
            self.models.setCurrentRow(0)
        found = f"{len(names)} model(s) on the server." if names else "The server lists no models."
        self.message.setText(" ".join([found, *self._notes]))

    def _failed(self, exc: BaseException) -> None:
        fix = getattr(exc, "fix", "")
        self.message.setText(f"{getattr(exc, 'message', exc)} {fix}".strip())

    def _choose(self) -> None:
        item = self.models.currentItem()
        if item is not None:
            self.server_chosen.emit(self.url.text().strip(), item.text())
