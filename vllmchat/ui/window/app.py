"""The desktop app's entry point (``vllmchat`` with no command)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication

    from vllmchat.ui.window.main_window import MainWindow

START = time.perf_counter()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllmchat")
    p.add_argument(
        "--install-desktop",
        action="store_true",
        help="add vllmchat to this user's application menu",
    )
    p.add_argument(
        "--self-test",
        action="store_true",
        help="start headless, load the demo model, answer once, and exit",
    )
    p.add_argument("--model", help="load this .gguf")
    p.add_argument("--exit-after-show", action="store_true", help=argparse.SUPPRESS)
    return p


def run_app(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.install_desktop:
        from vllmchat.ui.window.desktop.desktop_entry import install_desktop_entry

        print(install_desktop_entry())
        return 0
    if args.self_test or args.exit_after_show:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication, QMessageBox

    from vllmchat.core.app.start import CannotStart, open_storage
    from vllmchat.core.app_settings import load_app_settings, save_app_settings
    from vllmchat.core.resources import resource_path
    from vllmchat.ui.window.main_window import MainWindow

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("vllmchat")
    app.setDesktopFileName("vllmchat")
    app.setWindowIcon(QIcon(str(resource_path("icons/vllmchat.svg"))))
    settings = load_app_settings()
    if args.model:
        settings = settings.with_changes(model_path=os.path.abspath(args.model))
    if args.self_test:
        from vllmchat.core.demo_model import demo_model_path

        settings = settings.with_changes(model_path=str(demo_model_path()), n_ctx=1024)
    storage = open_storage(on_lock=_print_lock)
    if isinstance(storage, CannotStart):  # a reason the window cannot fix
        print(f"error: {storage.message}", file=sys.stderr)
        if not args.self_test and not args.exit_after_show:
            QMessageBox.critical(None, "vllmchat cannot open its conversations", storage.message)
        return 2
    persist = None if args.self_test else save_app_settings
    window = MainWindow(storage.app(settings, persist=persist))
    window.show()
    storage.tell_locks(lock_messages_in_status(window))
    if storage.recovered:
        print(f"note: {storage.recovered}", file=sys.stderr)
        window.show_notice("Conversations recovered", storage.recovered)
    print(f"window shown in {time.perf_counter() - START:.2f}s", file=sys.stderr, flush=True)
    try:
        if args.exit_after_show:
            window.close()
            return 0
        if args.self_test:
            return _self_test(app, window)
        window.start()
        quit_on_termination(window)
        return app.exec()
    finally:
        storage.close()


def _print_lock(event: object) -> None:
    """A wait for another process's lock while the window is not up yet."""
    print(f"note: {getattr(event, 'message', event)}", file=sys.stderr, flush=True)


def lock_messages_in_status(window: MainWindow) -> Callable[[object], None]:
    """A listener for the store's lock waits that shows them in the window's status
    bar, from any thread (painted at once, even while the GUI thread waits)."""
    from PySide6.QtCore import QObject, Signal

    class Relay(QObject):
        said = Signal(str)

    relay = Relay(window)

    def show(text: str) -> None:
        window.statusBar().showMessage(text, 15000)
        window.statusBar().repaint()

    relay.said.connect(show)
    return lambda event: relay.said.emit(str(getattr(event, "message", event)))


def quit_on_termination(window: object) -> object:
    """SIGTERM and SIGINT (a logout, ``kill``) close the window like the user would:
    the streaming reply is kept (marked partial), the KV state saved, the engine ended.

    Python runs signal handlers only between bytecodes, so a timer wakes the
    interpreter while Qt's event loop waits. Returns the timer.
    """
    import signal

    from PySide6.QtCore import QTimer

    def close(*_: object) -> None:
        QTimer.singleShot(0, window.close)  # type: ignore[attr-defined]

    signal.signal(signal.SIGTERM, close)
    signal.signal(signal.SIGINT, close)
    timer = QTimer(window)  # type: ignore[arg-type]
    timer.setInterval(200)
    timer.timeout.connect(lambda: None)
    timer.start()
    return timer


def _self_test(app: QApplication, window: MainWindow) -> int:
    """Load the demo model, stream one reply, close; exit 0 when it all worked."""
    from PySide6.QtCore import QObject, QTimer, Slot

    from vllmchat.core.engine.events import DoneEvent

    class Probe(QObject):
        """Receives the engine's signals on the GUI thread."""

        ok = False
        tokens = 0

        @Slot(object)
        def loaded(self, _event: object) -> None:
            window.send("Say hello.")

        @Slot(str)
        def token(self, _text: str) -> None:
            self.tokens += 1

        @Slot(object)
        def finished(self, event: DoneEvent) -> None:
            self.ok = bool(event.text)
            window.close()

        @Slot(object)
        def load_failed(self, event: object) -> None:
            print(f"self-test: load failed: {event}", file=sys.stderr)
            window.close()

        @Slot(object)
        def turn_failed(self, event: object) -> None:
            print(f"self-test: turn failed: {event}", file=sys.stderr)
            window.close()

    probe = Probe()
    events = window.bridge.events
    events.load_finished.connect(probe.loaded)
    events.load_failed.connect(probe.load_failed)
    events.token_received.connect(probe.token)
    events.turn_finished.connect(probe.finished)
    events.turn_failed.connect(probe.turn_failed)
    window.start()
    QTimer.singleShot(120_000, window.close)
    app.exec()
    print(f"self-test: {'ok' if probe.ok else 'FAILED'} ({probe.tokens} tokens)")
    return 0 if probe.ok else 1
