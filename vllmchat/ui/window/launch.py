"""Start the window, or say why it cannot start (importable without Qt).

Qt aborts the whole process when no platform plugin can load, so the plugin's
libraries are checked before PySide6 is imported; the caller then starts the
terminal chat with the reason.
"""

from __future__ import annotations

import os

from vllmchat.core.machine.qt_runtime import window_blocker

HEADLESS_FLAGS = {"--self-test", "--exit-after-show"}


def start_window(args: list[str]) -> int | str:
    """The window's exit code, or why the window cannot open here."""
    if HEADLESS_FLAGS & set(args):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    blocker = None if "--install-desktop" in args else window_blocker()
    if blocker:
        return blocker
    try:
        from vllmchat.ui.window.app import run_app

    except ImportError as exc:
        return f"The desktop UI cannot load ({exc})."
    return run_app(args)
