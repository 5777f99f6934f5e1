"""The local API's key as the Server panel shows it: hidden or shown, a new one made,
copied, removed. It lives in the OS keyring; the keyring is read and written on a
worker (a locked keyring may wait for the user)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from vllmchat.core.app.serving.api_key import new_server_key, server_key, set_server_key
from vllmchat.ui.common.icons import icon
from vllmchat.ui.common.workers import WorkerGroup

NO_KEY = "no key set"
NOTE_STYLE = "color: #b06000;"


def _remove_key() -> tuple[str, str | None]:
    return "", set_server_key("")


class KeyRow(QWidget):
    """The key, hidden until asked; ``key`` is "" while none is set (or not read yet)."""

    key_changed = Signal(str)
    """The key as the keyring holds it now ("" for none), once read or changed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = ""
        self.known = False  # the keyring has been read
        self._locked = False  # the server runs with the key it started with
        self._busy = False  # the keyring is being read or written
        self.workers = WorkerGroup(self)
        self.note = QLabel()  # the keyring could not keep the key, or failed
        self.note.setWordWrap(True)
        self.note.setStyleSheet(NOTE_STYLE)
        self.note.hide()
        self.field = QLineEdit()
        self.field.setReadOnly(True)
        self.field.setEchoMode(QLineEdit.EchoMode.Password)
        self.field.setPlaceholderText("reading the keyring…")
        self.field.setToolTip("Clients send it as 'Authorization: Bearer KEY'")
        self.field.setMinimumWidth(180)
        self.show_button = QPushButton("Show")
        self.show_button.setCheckable(True)
        self.show_button.setToolTip("Show or hide the key")
        self.show_button.toggled.connect(self._shown)
        self.new_button = QPushButton(icon("regenerate"), "New key")
        self.new_button.setToolTip("Make a new random key (clients must then send it)")
        self.new_button.clicked.connect(self.make_new)
        self.copy_button = QPushButton(icon("copy"), "Copy")
        self.copy_button.setToolTip("Copy the key")
        self.copy_button.clicked.connect(self.copy)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Ask no key (only this machine can then be served)")
        self.remove_button.clicked.connect(self.remove)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.field, 1)
        for button in (self.show_button, self.new_button, self.copy_button, self.remove_button):
            row.addWidget(button)
        self._set_busy(True)
        self.workers.run(lambda: (server_key(), None), self._on_key, self._on_failed, name="Key")

    def make_new(self) -> None:
        """A new random key, kept in the keyring."""
        self._set_busy(True)
        self.workers.run(new_server_key, self._on_key, self._on_failed, name="New key")

    def remove(self) -> None:
        """No key from now on (a server on the network then refuses to start)."""
        self._set_busy(True)
        self.workers.run(_remove_key, self._on_key, self._on_failed, name="Remove key")

    def copy(self) -> None:
        if self.key:
            QGuiApplication.clipboard().setText(self.key)

    def set_locked(self, locked: bool) -> None:
        """While the server runs its key stays: it was given the key it started with."""
        self._locked = locked
        self._set_busy(self._busy)

    def _on_key(self, result: tuple[str, str | None]) -> None:
        key, warning = result
        self.key, self.known = key, True
        self.field.setText(key)
        self.field.setCursorPosition(0)
        self.field.setPlaceholderText(NO_KEY)
        self._set_busy(False)
        if warning:  # the keyring could not keep it: one line, the whole of it on hover
            self._note("No system keyring: this key lasts until the app closes.", warning)
        else:
            self._note("")
        self.key_changed.emit(key)

    def _on_failed(self, exc: Exception) -> None:
        self.known = True
        self.field.setPlaceholderText(NO_KEY)
        self._set_busy(False)
        self._note("The keyring failed: no key is read.", str(exc))

    def _note(self, text: str, detail: str = "") -> None:
        self.note.setText(text)
        self.note.setToolTip(detail)
        self.note.setVisible(bool(text))

    def _shown(self, shown: bool) -> None:
        mode = QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password
        self.field.setEchoMode(mode)
        self.show_button.setText("Hide" if shown else "Show")

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        locked = busy or self._locked
        self.new_button.setEnabled(not locked)
        self.remove_button.setEnabled(not locked and bool(self.key))
        self.copy_button.setEnabled(not busy and bool(self.key))
        self.show_button.setEnabled(bool(self.key))

    def close_workers(self) -> None:
        self.workers.join()
